#include "lab/rng.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "lab/stats.hpp"

namespace {

std::vector<float> uniform(std::uint64_t seed, std::size_t n, int skip_fills = 0) {
  lab::Rng r(seed);
  std::vector<float> v(n);
  for (int i = 0; i < skip_fills; ++i) r.uniform(std::span<float>(v));
  r.uniform(std::span<float>(v));
  return v;
}

TEST(Rng, SameSeedSameNumbers) { EXPECT_EQ(uniform(42, 1000), uniform(42, 1000)); }

TEST(Rng, DifferentSeedsDiffer) {
  const auto a = uniform(42, 1000), b = uniform(43, 1000);
  int same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 5);
}

TEST(Rng, SuccessiveFillsDiffer) {
  const auto a = uniform(7, 1000, 0), b = uniform(7, 1000, 1);
  EXPECT_NE(a, b);
}

TEST(Rng, PrefixIsIndependentOfLength) {
  // Element i depends on (seed, fill, i) only, so a shorter fill is a prefix of a longer one.
  const auto a = uniform(9, 100), b = uniform(9, 1000);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
}

TEST(Rng, UniformRangeAndMoments) {
  lab::Rng r(1234);
  std::vector<float> v(1 << 20);
  r.uniform(std::span<float>(v), -2.f, 6.f);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.f);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 6.f);
  const std::vector<double> d(v.begin(), v.end());
  EXPECT_NEAR(lab::stats::mean(d), 2.0, 0.01);               // (lo + hi) / 2
  EXPECT_NEAR(lab::stats::stddev(d), 8.0 / std::sqrt(12.0), 0.01);  // (hi - lo) / sqrt(12)
  std::set<float> distinct(v.begin(), v.begin() + 1000);
  EXPECT_GT(distinct.size(), 990u);  // never constant
}

TEST(Rng, NormalMoments) {
  lab::Rng r(99);
  std::vector<float> v(1 << 20);
  r.normal(std::span<float>(v), 1.f, 3.f);
  const std::vector<double> d(v.begin(), v.end());
  EXPECT_NEAR(lab::stats::mean(d), 1.0, 0.02);
  EXPECT_NEAR(lab::stats::stddev(d), 3.0, 0.02);
  for (float x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST(Rng, IntegersCoverTheirRange) {
  lab::Rng r(5);
  std::vector<std::int32_t> v(10000);
  r.integers(std::span<std::int32_t>(v), -3, 4);
  std::set<std::int32_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<std::int32_t>{-3, -2, -1, 0, 1, 2, 3}));
}

TEST(Rng, FreshSeedsDiffer) { EXPECT_NE(lab::fresh_seed(), lab::fresh_seed()); }

}  // namespace
