#include "lab/verify.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "lab/check.hpp"
#include "lab/rng.hpp"

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

TEST(Verify, IdenticallyZeroReferenceIsCheckedElementByElement) {
  const std::vector<double> ref(5, 0.0);
  const std::vector<float> zeros(5, 0.f);
  const auto v = compare(zeros, ref, Tolerance::exact());
  EXPECT_TRUE(v.pass) << v.details();
  EXPECT_TRUE(v.zero_reference);
  // Exact: any non-zero element fails, and is named.
  std::vector<float> one = zeros;
  one[3] = 1e-30f;
  const auto w = compare(one, ref, Tolerance::exact(), "dx");
  EXPECT_FALSE(w.pass);
  ASSERT_EQ(w.first.size(), 1u);
  EXPECT_EQ(w.first[0].index, 3u);
  EXPECT_NE(w.reason.find("identically zero"), std::string::npos) << w.reason;
  // fp32: within atol passes (no relative L2, which is undefined against zero); beyond it fails.
  std::vector<float> small(5, 0.f);
  small[1] = 5e-6f;
  EXPECT_TRUE(compare(small, ref, Tolerance::fp32()).pass);
  small[1] = 5e-5f;
  EXPECT_FALSE(compare(small, ref, Tolerance::fp32()).pass);
  // The NaN poison still catches an unwritten element.
  std::vector<float> unwritten(5, 0.f);
  unwritten[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(compare(unwritten, ref, Tolerance::fp32()).pass);
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

// A part whose reference is identically zero (dQ of a one-key attention: the softmax of one score
// has no gradient) has no relative L2 error: the combined verdict's rel_l2 is the other parts', and
// the summary names the zero part, where it printed "rel_l2 inf" for a correct kernel. A wrong
// element of the zero part still fails.
TEST(Verify, CombinedRelL2LeavesOutZeroReferenceParts) {
  const std::vector<double> ref{1.0, 2.0}, zero(2, 0.0);
  const std::vector<float> near{1.f, 2.2f}, tiny{0.f, 1e-9f};
  const Tolerance loose{.atol = 1e-6, .rtol = 0.5, .max_rel_l2 = 0.5, .name = "loose"};
  auto v = compare(near, ref, loose, "dv");
  v.also(compare(tiny, zero, loose, "dq")).also(compare(near, ref, loose, "dk"));
  EXPECT_TRUE(v.pass) << v.summary();
  EXPECT_NEAR(v.rel_l2, 0.2 / std::sqrt(5.0), 1e-6);
  EXPECT_FALSE(v.zero_reference);
  EXPECT_EQ(v.zero_parts, "dq");
  EXPECT_NE(v.summary().find("; dq: zero reference, not in rel_l2"), std::string::npos) << v.summary();
  EXPECT_EQ(v.summary().find("inf"), std::string::npos) << v.summary();
  // The zero part first, then two zero parts: named in order; all zero: "zero reference" alone.
  auto w = compare(tiny, zero, loose, "dq");
  w.also(compare(near, ref, loose, "dv")).also(compare(tiny, zero, loose, "dk"));
  EXPECT_EQ(w.zero_parts, "dq+dk");
  EXPECT_NEAR(w.rel_l2, 0.2 / std::sqrt(5.0), 1e-6);
  auto z = compare(tiny, zero, loose, "dq");
  z.also(compare(tiny, zero, loose, "dk"));
  EXPECT_TRUE(z.zero_reference);
  EXPECT_EQ(z.zero_parts, "");
  EXPECT_NE(z.summary().find("; zero reference)"), std::string::npos) << z.summary();
  // An element of the zero part beyond atol fails the whole.
  const std::vector<float> off{0.f, 1e-3f};
  auto f = compare(near, ref, loose, "dv");
  f.also(compare(off, zero, loose, "dq"));
  EXPECT_FALSE(f.pass);
  EXPECT_NE(f.reason.find("identically zero"), std::string::npos) << f.reason;
}

// A further check's note (the bf16 attention backward's distance from its emulation) is printed
// after the verdict, passing or failing, and combined verdicts keep every part's.
TEST(Verify, NotesArePrintedAndCombined) {
  const std::vector<double> ref{1.0, 2.0};
  const std::vector<float> good{1.f, 2.f};
  auto a = compare(good, ref, Tolerance::exact(), "dx");
  a.note = "dx's distance 0.1 of its allowance";
  auto b = compare(good, ref, Tolerance::exact(), "dw");
  b.note = "dw's distance 0.2 of its allowance";
  EXPECT_NE(a.summary().find("dx's distance 0.1"), std::string::npos);
  a.also(b);
  EXPECT_NE(a.summary().find("dx's distance 0.1 of its allowance; dw's distance 0.2"), std::string::npos) << a.summary();
  auto c = compare(good, ref, Tolerance::exact(), "dq");
  c.pass = false, c.reason = c.note = "dq's distance 3 of its allowance";
  EXPECT_EQ(c.summary().find("allowance; dq"), std::string::npos) << "a reason that is the note is printed once";
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

namespace {

using lab::fp32::sum_error;
constexpr double u = lab::fp32::kUnitRoundoff;

TEST(SumError, IsTheDeterministicBoundForFewTermsAndSqrtNForMany) {
  EXPECT_NEAR(sum_error(1), u, 1e-3 * u);
  EXPECT_NEAR(sum_error(50), 50 * u / (1 - 50 * u), 1e-9 * u);  // n u below lambda sqrt(n) u
  // Beyond lambda^2 = 100 terms, the probabilistic bound: about 10 sqrt(n) u.
  EXPECT_NEAR(sum_error(1e6), 10 * 1000 * u, 1e-2 * 10 * 1000 * u);
  EXPECT_LT(sum_error(1e6), 1e6 * u);
  // It grows with n, and never drops below one rounding.
  double last = 0;
  for (double n : {1.0, 2.0, 10.0, 100.0, 1e3, 1e5, 1e7, 1e9}) {
    EXPECT_GT(sum_error(n), last) << n;
    last = sum_error(n);
  }
  EXPECT_GE(sum_error(0), u);
}

// fp32 sums of random terms, as kernels add them: one accumulator in order, pairwise, and in
// blocks of 256 added one by one: every one within sum_error(n) sum|t| of the exact sum, over
// seeds, lengths and sign mixes (a cancelling sum is the hard case for a relative bound).
TEST(SumError, BoundsRealFp32SumsInEveryOrder) {
  auto pairwise = [](auto&& self, const float* t, std::size_t n) -> float {
    if (n == 1) return t[0];
    return self(self, t, n / 2) + self(self, t + n / 2, n - n / 2);
  };
  lab::Rng rng(20261123);
  int cases = 0;
  for (std::size_t n : {2u, 3u, 7u, 100u, 1000u, 4097u, 70000u, 300000u}) {
    for (double lo : {0.0, -1.0}) {  // positive terms, or mixed signs (cancelling)
      for (int rep = 0; rep < 6; ++rep) {
        std::vector<float> t(n);
        rng.uniform(std::span<float>(t), static_cast<float>(lo), 1.f);
        lab::Sum exact;
        for (float x : t) exact.add(x);
        float seq = 0;
        for (float x : t) seq += x;
        float blocked = 0;
        for (std::size_t b = 0; b < n; b += 256) {
          float part = 0;
          for (std::size_t i = b; i < std::min(n, b + 256); ++i) part += t[i];
          blocked += part;
        }
        const float pw = pairwise(pairwise, t.data(), n);
        const double bound = sum_error(double(n)) * exact.magnitude;
        for (float got : {seq, blocked, pw}) {
          EXPECT_LE(std::fabs(double(got) - exact.value), bound) << "n " << n << " lo " << lo << " rep " << rep;
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 8 * 2 * 6 * 3);
}

// The slack admits rounding, not bugs: a sum that leaves out one term of a short, well conditioned
// sum fails, while the same sum computed right passes.
TEST(SumError, SlackStillCatchesADroppedTerm) {
  std::vector<float> t(33);
  lab::Rng rng(7);
  rng.uniform(std::span<float>(t), 0.5f, 1.f);
  lab::Sum s;
  for (float x : t) s.add(x);
  float right = 0, dropped = 0;
  for (float x : t) right += x;
  for (std::size_t i = 0; i + 1 < t.size(); ++i) dropped += t[i];
  const std::vector<double> ref{s.value}, slack{sum_error(33) * s.magnitude};
  EXPECT_TRUE(compare(std::vector<float>{right}, ref, Tolerance::fp32(), "y", {}, slack).pass);
  const auto v = compare(std::vector<float>{dropped}, ref, Tolerance::fp32(), "y", {}, slack);
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(v.conditioned);
  EXPECT_NE(v.summary().find("conditioning"), std::string::npos);
}

// A cancelling sum: fp32's error is set by sum|t|, not by the small result. The fixed relative
// bound rejects a correct answer; the conditioned one accepts it (the seed-dependent failure of
// weighted_sum_backward's dw, 70000 terms).
TEST(SumError, ConditionedBoundAcceptsACorrectCancellingSum) {
  lab::Rng rng(269593303351320ull);
  std::vector<float> x(70000), dy(70000);
  rng.uniform(std::span<float>(x), -1.f, 1.f);
  rng.uniform(std::span<float>(dy), -1.f, 1.f);
  lab::Sum s;
  float got = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    s.add(double(x[i]) * dy[i]);
    got += x[i] * dy[i];
  }
  const std::vector<double> ref{s.value}, slack{sum_error(70001) * s.magnitude};
  const std::vector<float> g{got};
  EXPECT_TRUE(compare(g, ref, Tolerance::fp32(), "dw", {}, slack).pass);
  EXPECT_LT(slack[0], 1e-3 * s.magnitude);  // still a bound: far below the terms' size
}

TEST(SumError, SlackMustBeFiniteAndOfTheReferenceLength) {
  const std::vector<double> ref{1.0, 2.0};
  const std::vector<float> got{1.f, 2.f};
  EXPECT_THROW(compare(got, ref, Tolerance::fp32(), "y", {}, std::vector<double>{0.0}), lab::Error);
  EXPECT_FALSE(compare(got, ref, Tolerance::fp32(), "y", {}, std::vector<double>{0.0, -1.0}).pass);
  EXPECT_FALSE(compare(got, ref, Tolerance::fp32(), "y", {}, std::vector<double>{0.0, NAN}).pass);
}

// The verdict says how close a pass came: the worst element's error over its own bound (atol +
// rtol |ref| + slack), kept as the largest when verdicts combine, and printed with a pass.
TEST(Verdict, WorstShareIsTheWorstElementsUseOfItsBound) {
  const auto t = Tolerance::per_element(1e-3, 0, "abs");
  const std::vector<float> got{1.0f, 2.0f, 3.0f};
  const std::vector<double> ref{1.0, 2.0 + 5e-4, 3.0 - 2.5e-4};
  const auto v = compare(got, ref, t, "y");
  EXPECT_TRUE(v.pass);
  EXPECT_NEAR(v.worst_share, 0.5, 1e-9);
  EXPECT_NE(v.summary().find("worst element at 0.5 of its bound"), std::string::npos) << v.summary();
  // Slack widens each element's own bound: element 1's to 3e-3, so element 2 (0.25) is the worst.
  const std::vector<double> slack{0, 2e-3, 0};
  EXPECT_NEAR(compare(got, ref, t, "y", {}, slack).worst_share, 0.25, 1e-9);
  auto off = ref;
  off[0] = 1.0 + 2e-3;
  auto w = compare(got, off, t, "z");
  EXPECT_FALSE(w.pass);
  EXPECT_NEAR(w.worst_share, 2.0, 1e-9);
  auto both = v;
  both.also(w);
  EXPECT_NEAR(both.worst_share, 2.0, 1e-9);
  // A zero bound missed is infinitely far; an exact answer under a zero bound uses none of it.
  EXPECT_EQ(compare(got, off, Tolerance::exact(), "e").worst_share, INFINITY);
  const std::vector<double> same{1.0, 2.0, 3.0};
  EXPECT_EQ(compare(got, same, Tolerance::exact(), "e").worst_share, 0.0);
}

}  // namespace
