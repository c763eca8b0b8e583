// The main of every chapter's test binary: one test per (variant, check shape), made from the
// registry, so adding a variant adds its tests with no new test code; and the tests its files make
// per variant (lab/variant_tests.hpp), registered here once the registry is complete. All variants
// of a topic see identical inputs for a shape (the same seed). Without a GPU every test reports
// SKIPPED.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "lab/harness.hpp"
#include "lab/memory.hpp"
#include "lab/registry.hpp"
#include "lab/testing.hpp"
#include "lab/variant_tests.hpp"

namespace {

class VariantCheck : public ::testing::Test {
 public:
  VariantCheck(const lab::Variant* v, lab::Shape s) : v_(v), s_(std::move(s)) {}
  void TestBody() override {
    LAB_REQUIRE_GPU();
    if (const std::string why = lab::unsupported(*v_, s_); !why.empty()) GTEST_SKIP() << "N/A: " << why;
    const std::uint64_t seed = lab::testing::run_seed();
    lab::Stream stream;
    const lab::Verdict r = lab::check_variant(*v_, s_, seed, stream);
    EXPECT_TRUE(r.pass) << v_->program << " at " << s_.str() << ": " << r.details() << "\n(seed " << seed
                        << "; reproduce with LAB_SEED=" << seed << ")";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }

 private:
  const lab::Variant* v_;
  lab::Shape s_;
};

// What a topic says of its work at each check shape (no GPU needed): bytes and flops not negative,
// and the part of the bytes that it writes (the floor a report sets it beside: lab::Work::written)
// within them.
class WorkModel : public ::testing::Test {
 public:
  explicit WorkModel(const lab::TopicInfo* t) : t_(t) {}
  void TestBody() override {
    for (const lab::Shape& s : t_->checks) {
      const lab::Work w = t_->work(s);
      EXPECT_GE(w.bytes, 0) << s.str();
      EXPECT_GE(w.flops, 0) << s.str();
      EXPECT_GE(w.written_bytes(), 0) << s.str();
      EXPECT_LE(w.written_bytes(), w.bytes) << s.str();
    }
  }

 private:
  const lab::TopicInfo* t_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto registered = lab::registered_variants();
  if (!registered) return lab::kExitUsage;
  const std::vector<const lab::Variant*>& all = *registered;
  std::vector<const lab::TopicInfo*> topics;
  for (const lab::Variant* v : all)
    if (std::find(topics.begin(), topics.end(), v->topic) == topics.end()) {
      topics.push_back(v->topic);
      ::testing::RegisterTest(v->topic->name.c_str(), "work_model", nullptr, nullptr, __FILE__, __LINE__,
                              [t = v->topic]() -> ::testing::Test* { return new WorkModel(t); });
    }
  for (const lab::Variant* v : all) {
    for (const lab::Shape& s : lab::check_set(*v)) {
      ::testing::RegisterTest(v->topic->name.c_str(), (v->program + "/" + s.str()).c_str(), nullptr,
                              nullptr, __FILE__, __LINE__,
                              [v, s]() -> ::testing::Test* { return new VariantCheck(v, s); });
    }
  }
  try {
    lab::testing::register_per_variant_tests(all);
  } catch (const lab::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return RUN_ALL_TESTS();
}
