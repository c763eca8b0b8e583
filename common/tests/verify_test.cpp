#include "lab/verify.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "lab/check.hpp"

namespace {

using lab::compare;
using lab::Tolerance;

const Tolerance kLoose{0.5, 0.25, 1e9, "loose"};

TEST(Verify, IdenticalPassesWithZeroError) {
  const std::vector<float> got{1.f, -2.f, 3.5f};
  const std::vector<double> ref{1.0, -2.0, 3.5};
  const auto v = compare(got, ref, Tolerance::exact());
  EXPECT_TRUE(v.pass) << v.details();
  EXPECT_EQ(v.max_abs, 0.0);
  EXPECT_EQ(v.rel_l2, 0.0);
  EXPECT_EQ(v.bad, 0u);
  EXPECT_EQ(v.count, 3u);
}

TEST(Verify, OneElementOffFailsAndIsNamed) {
  std::vector<float> got(12, 1.f);
  std::vector<double> ref(12, 1.0);
  got[7] = 1.5f;
  const auto v = compare(got, ref, Tolerance::fp32(), "out", {3, 4});
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.bad, 1u);
  ASSERT_EQ(v.first.size(), 1u);
  EXPECT_EQ(v.first[0].index, 7u);
  EXPECT_DOUBLE_EQ(v.first[0].got, 1.5);
  EXPECT_DOUBLE_EQ(v.first[0].expected, 1.0);
  EXPECT_EQ(v.worst_index, 7u);
  EXPECT_DOUBLE_EQ(v.max_abs, 0.5);
  EXPECT_NE(v.details().find("out[1, 3]: got 1.5, expected 1"), std::string::npos) << v.details();
}

TEST(Verify, ToleranceEdgeIsInclusive) {
  // bound = atol + rtol * |ref| = 0.5 + 0.25 * 1 = 0.75, all exactly representable.
  const std::vector<double> ref{1.0};
  const std::vector<float> at{1.75f};
  EXPECT_TRUE(compare(at, ref, kLoose).pass);
  const std::vector<float> above{std::nextafter(1.75f, 2.f)};
  EXPECT_FALSE(compare(above, ref, kLoose).pass);
  const std::vector<float> below{0.25f};
  EXPECT_TRUE(compare(below, ref, kLoose).pass);
  const std::vector<float> under{std::nextafter(0.25f, 0.f)};
  EXPECT_FALSE(compare(under, ref, kLoose).pass);
}

TEST(Verify, NaNNeverPasses) {
  const std::vector<double> ref{1.0, 2.0};
  const std::vector<float> got{1.f, std::numeric_limits<float>::quiet_NaN()};
  const Tolerance anything{1e30, 1e30, 1e30, "anything"};
  const auto v = compare(got, ref, anything);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.nan, 1u);
  EXPECT_EQ(v.bad, 1u);
  EXPECT_NE(v.reason.find("NaN"), std::string::npos);
}

TEST(Verify, InfNeverPasses) {
  const std::vector<double> ref{1.0, 2.0};
  const std::vector<float> got{std::numeric_limits<float>::infinity(), 2.f};
  const auto v = compare(got, ref, Tolerance{1e30, 1e30, 1e30, "anything"});
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.inf, 1u);
}

TEST(Verify, NonFiniteReferenceIsRefused) {
  const std::vector<double> ref{1.0, std::numeric_limits<double>::quiet_NaN()};
  const std::vector<float> got{1.f, 2.f};
  const auto v = compare(got, ref, kLoose);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.reason.find("reference"), std::string::npos);
}

TEST(Verify, AllZeroReferenceIsRefused) {
  const std::vector<double> ref(5, 0.0);
  const std::vector<float> got(5, 0.f);
  const auto v = compare(got, ref, Tolerance::exact());
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.reason.find("all zeros"), std::string::npos);
}

TEST(Verify, RelativeL2IsComputed) {
  const std::vector<double> ref{3.0, 4.0};  // norm 5
  const std::vector<float> got{3.f, 4.5f};  // error norm 0.5
  const auto v = compare(got, ref, kLoose);
  EXPECT_NEAR(v.rel_l2, 0.1, 1e-12);
  EXPECT_NEAR(v.max_rel, 0.125, 1e-12);
}

TEST(Verify, RelativeL2LimitFailsEvenWhenElementsPass) {
  const std::vector<double> ref{3.0, 4.0};
  const std::vector<float> got{3.f, 4.5f};
  const Tolerance t{1.0, 0.0, 0.05, "tight-l2"};
  const auto v = compare(got, ref, t);
  EXPECT_EQ(v.bad, 0u);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.reason.find("relative L2"), std::string::npos);
}

TEST(Verify, KeepsOnlyTheFirstMismatches) {
  std::vector<double> ref(100, 1.0);
  std::vector<float> got(100, 2.f);
  const auto v = compare(got, ref, Tolerance::fp32());
  EXPECT_EQ(v.bad, 100u);
  ASSERT_EQ(v.first.size(), lab::kMismatchesKept);
  for (std::size_t i = 0; i < v.first.size(); ++i) EXPECT_EQ(v.first[i].index, i);
  EXPECT_NE(v.details().find("and 92 more"), std::string::npos);
}

TEST(Verify, LengthMismatchThrows) {
  const std::vector<double> ref{1.0, 2.0};
  const std::vector<float> got{1.f};
  EXPECT_THROW(compare(got, ref, Tolerance::exact()), lab::Error);
}

TEST(Verify, IntegersCompareExactly) {
  const std::vector<std::int32_t> ref{1, 2, 3}, same{1, 2, 3}, off{1, 2, 4};
  EXPECT_TRUE(compare(same, ref).pass);
  EXPECT_FALSE(compare(off, ref).pass);
}

TEST(Verify, CombinedVerdictFailsWhenAnyPartFails) {
  const std::vector<double> ref{1.0, 2.0};
  const std::vector<float> good{1.f, 2.f}, bad{1.f, 3.f};
  auto a = compare(good, ref, Tolerance::exact(), "dx");
  const auto b = compare(bad, ref, Tolerance::exact(), "dw");
  a.also(b);
  EXPECT_FALSE(a.pass);
  EXPECT_EQ(a.count, 4u);
  EXPECT_EQ(a.bad, 1u);
  EXPECT_EQ(a.what, "dx+dw");
  EXPECT_FALSE(a.reason.empty());
  auto c = compare(good, ref, Tolerance::exact(), "dx");
  c.also(compare(good, ref, Tolerance::exact(), "dw"));
  EXPECT_TRUE(c.pass);
}

TEST(Verify, PresetsGrowLooserWithLowerPrecision) {
  EXPECT_LT(Tolerance::fp32().max_rel_l2, Tolerance::tf32().max_rel_l2);
  EXPECT_LT(Tolerance::tf32().max_rel_l2, Tolerance::bf16().max_rel_l2);
  EXPECT_EQ(Tolerance::exact().atol, 0.0);
  // A one-ulp fp32 error passes fp32 but not exact.
  const std::vector<double> ref{1.0};
  const std::vector<float> got{std::nextafter(1.f, 2.f)};
  EXPECT_TRUE(compare(got, ref, Tolerance::fp32()).pass);
  EXPECT_FALSE(compare(got, ref, Tolerance::exact()).pass);
}

}  // namespace

namespace {

TEST(Tolerance, PerElementBoundHasNoL2Bound) {
  const auto t = lab::Tolerance::per_element(5e-4, 1e-5, "approximation");
  // One element, near zero, off by 2e-4: within the per-element bound, hopeless in relative terms.
  const std::vector<float> got{0.0012f};
  const std::vector<double> ref{0.0010};
  EXPECT_TRUE(lab::compare(got, ref, t, "y").pass);
  // Outside the per-element bound: a failure, whatever the L2 says.
  const std::vector<float> far{0.0020f};
  EXPECT_FALSE(lab::compare(far, ref, t, "y").pass);
  EXPECT_FALSE(lab::compare(got, ref, lab::Tolerance::fp32(), "y").pass);
}

}  // namespace
