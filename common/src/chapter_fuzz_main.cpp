// The main of every chapter's fuzz binary: for each registered variant, one test that verifies it
// on LAB_FUZZ_CASES (default 60) random shapes near its topic's check shapes that it runs
// (lab::fuzz_shapes with its supports()), each under a seed of its own; a variant that runs none
// on this device (another architecture's) is skipped, saying why. A failure names the program, the shape and the seed, and the
// command that reproduces it. Labelled `fuzz` (and `gpu`): tools/gpu_check.sh runs it.
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "lab/fuzz.hpp"
#include "lab/harness.hpp"
#include "lab/memory.hpp"
#include "lab/registry.hpp"
#include "lab/testing.hpp"

namespace {

int fuzz_cases() {
  if (const char* s = std::getenv("LAB_FUZZ_CASES"); s && *s) {
    const int n = std::atoi(s);
    if (n > 0) return n;
  }
  return 60;
}

class VariantFuzz : public ::testing::Test {
 public:
  explicit VariantFuzz(const lab::Variant* v) : v_(v) {}
  void TestBody() override {
    LAB_REQUIRE_GPU();
    // Every variant draws its own shapes and seeds from the run's seed and its name, so one run
    // seed reproduces the whole sweep.
    const std::uint64_t base = lab::testing::run_seed() ^ std::hash<std::string>{}(v_->program);
    const int n = fuzz_cases();
    // Shapes this variant runs (its supports() on this device): a variant written for a few of its
    // topic's shapes is fuzzed at n of those, not at the few of n topic shapes that fit it.
    const auto shapes =
        lab::fuzz_shapes(*v_->topic, base, n, [this](const lab::Shape& s) { return lab::unsupported(*v_, s).empty(); });
    if (shapes.empty()) {
      // Why, in the variant's words: its reason at the first check shape it does not run (the
      // topic's first check shape may be one it runs, and its reason there empty).
      std::string why = "it runs some check shapes, but none of the shapes drawn near them";
      for (const lab::Shape& s : v_->topic->checks)
        if (std::string r = lab::unsupported(*v_, s); !r.empty()) {
          why = s.str() + ": " + r;
          break;
        }
      GTEST_SKIP() << v_->program << " runs none of " << 1000 * n << " shapes drawn near its topic's check shapes ("
                   << why << ")";
    }
    lab::Stream stream;
    int failed = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const lab::Shape& s = shapes[i];
      const std::uint64_t seed = (base + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1)) >> 16;
      std::string error;
      try {
        const lab::Verdict r = lab::check_variant(*v_, s, seed, stream);
        if (!r.pass) error = r.details();
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (!error.empty()) {
        ++failed;
        ADD_FAILURE() << v_->program << " at " << s.str() << " (seed " << seed << "): " << error
                      << "\n  reproduce: ./" << v_->topic->folder() << "/" << v_->program << " --check-only --skip-check-set --shape "
                      << s.str() << " --seed " << seed;
      }
    }
    const int ran = static_cast<int>(shapes.size());
    std::cout << "[ fuzz     ] " << v_->program << ": " << ran << " shapes, " << failed << " failed"
              << (ran < n ? " (of " + std::to_string(n) + " asked: it runs no more in " + std::to_string(1000 * n) +
                                " draws)"
                          : "")
              << "\n";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }

 private:
  const lab::Variant* v_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto registered = lab::registered_variants();
  if (!registered) return lab::kExitUsage;
  const std::vector<const lab::Variant*>& all = *registered;
  for (const lab::Variant* v : all)
    ::testing::RegisterTest("Fuzz", v->program.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [v]() -> ::testing::Test* { return new VariantFuzz(v); });
  return RUN_ALL_TESTS();
}
