// The main of every chapter's fuzz binary: for each registered variant, one test that verifies it
// on LAB_FUZZ_CASES (default 60) random shapes near its topic's check shapes (lab::fuzz_shapes),
// each under a seed of its own. A failure names the program, the shape and the seed, and the
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
    const auto shapes = lab::fuzz_shapes(*v_->topic, base, n);
    lab::Stream stream;
    int failed = 0, not_applicable = 0;
    for (int i = 0; i < n; ++i) {
      const lab::Shape& s = shapes[static_cast<std::size_t>(i)];
      const std::uint64_t seed = (base + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1)) >> 16;
      if (!lab::unsupported(*v_, s).empty()) {  // not this variant's shape (a head size, an architecture)
        ++not_applicable;
        continue;
      }
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
    std::cout << "[ fuzz     ] " << v_->program << ": " << n - not_applicable << " shapes, " << failed << " failed"
              << (not_applicable ? ", " + std::to_string(not_applicable) + " not applicable" : "") << "\n";
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
