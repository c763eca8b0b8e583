#include "lab/fuzz.hpp"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "lab/harness.hpp"

namespace {

lab::TopicInfo topic_with(std::vector<lab::Shape> checks, std::vector<std::string> dims,
                          std::vector<std::string> switches = {}) {
  lab::TopicInfo t;
  t.name = "fuzzed";
  t.chapter = 1;
  t.dims = std::move(dims);
  t.switches = std::move(switches);
  t.checks = std::move(checks);
  t.work = [](const lab::Shape& s) { return lab::Work{.bytes = 4.0 * double(s.elements()), .flops = 0}; };
  t.validate = [](const lab::Shape& s) { return s[0] > 5000 ? std::string("at most 5000 rows") : std::string(); };
  t.verifiable = [](const lab::Shape&) { return true; };
  return t;
}

TEST(Fuzz, ShapesAreValidNearTheChecksAndIncludeDegenerateOnes) {
  const auto t = topic_with({{1000, 777}, {31, 4097}, {4999, 3}}, {"rows", "cols"});
  const auto shapes = lab::fuzz_shapes(t, 42, 400);
  ASSERT_EQ(shapes.size(), 400u);
  int ones = 0, changed = 0;
  std::set<std::string> distinct;
  for (const auto& s : shapes) {
    ASSERT_EQ(s.rank(), 2u);
    EXPECT_GE(s[0], 1);
    EXPECT_GE(s[1], 1);
    EXPECT_LE(s[0], 5000) << s.str();  // validate refused the rest
    EXPECT_LE(s[1], 4097 + 4097 / 8 + 100) << s.str();
    if (s[0] == 1 || s[1] == 1) ++ones;
    if (std::find(t.checks.begin(), t.checks.end(), s) == t.checks.end()) ++changed;
    distinct.insert(s.str());
  }
  EXPECT_GT(ones, 20);       // degenerate extents on purpose
  EXPECT_GT(changed, 250);   // mostly new shapes
  EXPECT_GT(distinct.size(), 150u);
}

TEST(Fuzz, SameSeedSameShapesAndOtherSeedOthers) {
  const auto t = topic_with({{1000, 777}}, {"rows", "cols"});
  EXPECT_EQ(lab::fuzz_shapes(t, 7, 50), lab::fuzz_shapes(t, 7, 50));
  EXPECT_NE(lab::fuzz_shapes(t, 7, 50), lab::fuzz_shapes(t, 8, 50));
}

TEST(Fuzz, SwitchesAreZeroOrOneAndReferenceLimitsHold) {
  auto t = topic_with({{2, 65, 1}}, {"batch", "seq", "causal"}, {"causal"});
  t.work = [](const lab::Shape& s) { return lab::Work{.bytes = 0, .flops = double(s[1]) * 1e8}; };
  const auto shapes = lab::fuzz_shapes(t, 3, 200);
  bool on = false, off = false;
  for (const auto& s : shapes) {
    EXPECT_TRUE(s[2] == 0 || s[2] == 1) << s.str();
    on |= s[2] == 1, off |= s[2] == 0;
    EXPECT_LE(double(s[1]) * 1e8, lab::kVerifyFlopsLimit) << s.str();
  }
  EXPECT_TRUE(on && off);
}

// Where the topic states its reference's own cost (reference_work), the limits bound that, not the
// kernels' work.
TEST(Fuzz, TheReferencesOwnCostIsWhatTheLimitsBound) {
  auto t = topic_with({{40, 65}}, {"rows", "cols"});
  t.reference_work = [](const lab::Shape& s) { return lab::Work{.bytes = 0, .flops = double(s[0]) * 1e8}; };
  const auto shapes = lab::fuzz_shapes(t, 5, 200);
  ASSERT_EQ(shapes.size(), 200u);
  for (const auto& s : shapes) EXPECT_LE(double(s[0]) * 1e8, lab::kVerifyFlopsLimit) << s.str();
  EXPECT_TRUE(std::any_of(shapes.begin(), shapes.end(), [](const lab::Shape& s) { return s[0] == 40; }));
}

TEST(Fuzz, ATopicThatAcceptsNothingIsAnError) {
  auto t = topic_with({{1, 1}}, {"rows", "cols"});
  t.validate = [](const lab::Shape&) { return std::string("never"); };
  EXPECT_THROW(lab::fuzz_shapes(t, 1, 3), lab::Error);
}

// A variant's own shapes (the fuzz main passes its supports()): a variant that runs head sizes 64
// and 128 alone, an extent the draws keep only half the time, was fuzzed at the few of n topic
// shapes that kept it; asked for n of its own, it gets n, each one it takes.
TEST(Fuzz, AcceptKeepsTheVariantsOwnShapesAndAsManyAsAsked) {
  const auto t = topic_with({{1000, 64}, {31, 128}, {4999, 80}}, {"rows", "d"});
  const auto fits = [](const lab::Shape& s) { return s[1] == 64 || s[1] == 128; };
  const auto all = lab::fuzz_shapes(t, 11, 60);
  const auto own = lab::fuzz_shapes(t, 11, 60, fits);
  ASSERT_EQ(own.size(), 60u);
  for (const auto& s : own) EXPECT_TRUE(fits(s)) << s.str();
  const auto fitting = std::count_if(all.begin(), all.end(), fits);
  EXPECT_LT(fitting, 45) << "the topic's draws alone fit most of the time: the case shows nothing";
  std::set<std::string> distinct;
  for (const auto& s : own) distinct.insert(s.str());
  EXPECT_GT(distinct.size(), 20u);  // still new rows, not the check shapes over and over
}

TEST(Fuzz, AcceptingEveryShapeDrawsTheTopicsShapes) {
  const auto t = topic_with({{1000, 777}, {31, 4097}}, {"rows", "cols"});
  EXPECT_EQ(lab::fuzz_shapes(t, 7, 50, [](const lab::Shape&) { return true; }), lab::fuzz_shapes(t, 7, 50));
}

// A variant that runs nothing here (another architecture's): no shapes, no error; the fuzz main
// skips it. A topic that refuses everything stays an error whatever the variant takes.
TEST(Fuzz, AVariantThatRunsNothingGetsNoShapes) {
  const auto t = topic_with({{1000, 777}}, {"rows", "cols"});
  EXPECT_TRUE(lab::fuzz_shapes(t, 5, 4, [](const lab::Shape&) { return false; }).empty());
  EXPECT_EQ(lab::fuzz_shapes(t, 5, 4, [](const lab::Shape& s) { return s[0] == 1000 && s[1] == 777; }).size(), 4u);
  auto refusing = topic_with({{1, 1}}, {"rows", "cols"});
  refusing.validate = [](const lab::Shape&) { return std::string("never"); };
  EXPECT_THROW(lab::fuzz_shapes(refusing, 1, 3, [](const lab::Shape&) { return true; }), lab::Error);
}

TEST(Fuzz, NextPrime) {
  EXPECT_EQ(lab::next_prime(1), 1);
  EXPECT_EQ(lab::next_prime(2), 2);
  EXPECT_EQ(lab::next_prime(24), 29);
  EXPECT_EQ(lab::next_prime(4096), 4099);
}

}  // namespace
