#include "lab/stats.hpp"

#include <cmath>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace st = lab::stats;

TEST(Stats, Median) {
  const std::vector<double> odd{5, 1, 3}, even{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(st::median(odd), 3.0);
  EXPECT_DOUBLE_EQ(st::median(even), 2.5);
}

TEST(Stats, QuantileMatchesRType7) {
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(st::quantile(x, 0.25), 3.25);  // R: quantile(1:10, 0.25)
  EXPECT_DOUBLE_EQ(st::quantile(x, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(st::quantile(x, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(st::quantile(x, 1.0), 10.0);
  EXPECT_THROW(st::quantile(x, 1.5), std::invalid_argument);
}

TEST(Stats, MeanStddevCv) {
  const std::vector<double> x{2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(st::mean(x), 5.0);
  EXPECT_NEAR(st::stddev(x), std::sqrt(32.0 / 7.0), 1e-12);  // sample (n - 1)
  EXPECT_NEAR(st::cv(x), std::sqrt(32.0 / 7.0) / 5.0, 1e-12);
}

TEST(Stats, Geomean) {
  const std::vector<double> x{1, 10, 100};
  EXPECT_NEAR(st::geomean(x), 10.0, 1e-12);
  const std::vector<double> bad{1, 0};
  EXPECT_THROW(st::geomean(bad), std::invalid_argument);
}

TEST(Stats, EmptyInputsThrow) {
  const std::vector<double> none, one{1.0};
  EXPECT_THROW(st::median(none), std::invalid_argument);
  EXPECT_THROW(st::mean(none), std::invalid_argument);
  EXPECT_THROW(st::stddev(one), std::invalid_argument);
  EXPECT_DOUBLE_EQ(st::min(one), 1.0);
  EXPECT_DOUBLE_EQ(st::max(one), 1.0);
}

}  // namespace

namespace {

std::vector<double> split(const char* s) {
  std::vector<double> v;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    v.push_back(std::strtod(p, &end));
    p = (*end == ',') ? end + 1 : end;
  }
  return v;
}

// Reference p-values from scipy.stats.mannwhitneyu(x, y, alternative="two-sided").
TEST(MannWhitney, ExactSmallSamples) {
  const std::vector<double> x{1, 2, 3, 4, 5}, y{6, 7, 8, 9, 10};
  const auto r = lab::stats::mann_whitney_u(x, y);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0.0);
  EXPECT_NEAR(r.p, 0.007936507936507936, 1e-12);
  const auto s = lab::stats::mann_whitney_u(y, x);  // symmetric
  EXPECT_DOUBLE_EQ(s.u, 25.0);
  EXPECT_NEAR(s.p, r.p, 1e-12);
}

TEST(MannWhitney, ExactNineAgainstNine) {
  const std::vector<double> x{1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7, 8.8, 9.9};
  const std::vector<double> y{2.5, 4.5, 6.5, 8.5, 10.5, 12.5, 14.5, 16.5, 18.5};
  const auto r = lab::stats::mann_whitney_u(x, y);
  EXPECT_DOUBLE_EQ(r.u, 18.0);
  EXPECT_NEAR(r.p, 0.05030851501439737, 1e-12);
}

TEST(MannWhitney, AsymptoticWithTies) {
  const std::vector<double> x{1, 2, 2, 3, 3, 3, 4}, y{2, 3, 4, 4, 5, 5, 6, 7};
  const auto r = lab::stats::mann_whitney_u(x, y);
  EXPECT_FALSE(r.exact);  // ties: normal approximation
  EXPECT_DOUBLE_EQ(r.u, 8.5);
  EXPECT_NEAR(r.p, 0.025279736885893914, 1e-12);
}

TEST(MannWhitney, LargerSamplesBothMethods) {
  const auto x = split(
      "10.346,10.822,10.33,8.697,10.905,10.446,9.463,10.581,10.365,10.294,10.028,10.547,9.264,9.837,9.518,10.599,"
      "10.04,9.708,9.218,9.743,10.008,9.724,11.294,11.007,7.289,8.111,9.825,9.578,10.214,10.217");
  const auto y = split(
      "12.618,9.388,10.122,12.543,11.147,11.163,9.986,8.852,10.667,10.609,9.273,9.817,10.428,9.555,10.402,10.595,"
      "10.536,9.994,11.094,11.391,10.821,9.682,11.232,9.999,11.379");
  ASSERT_EQ(x.size(), 30u);
  ASSERT_EQ(y.size(), 25u);
  const auto e = lab::stats::mann_whitney_u(x, y, lab::stats::UMethod::exact);
  EXPECT_DOUBLE_EQ(e.u, 250.0);
  EXPECT_NEAR(e.p, 0.0345834501324777, 1e-10);
  const auto a = lab::stats::mann_whitney_u(x, y, lab::stats::UMethod::asymptotic);
  EXPECT_NEAR(a.p, 0.03534059796598986, 1e-12);
}

TEST(MannWhitney, IdenticalSamplesAreNotDifferent) {
  const std::vector<double> x{5, 5, 5, 5}, y{5, 5, 5, 5};
  EXPECT_DOUBLE_EQ(lab::stats::mann_whitney_u(x, y).p, 1.0);
}

TEST(Bootstrap, ReproducibleForASeedAndCoversTheEstimate) {
  const std::vector<double> a{10.1, 10.3, 9.9, 10.0, 10.2, 10.4, 9.8, 10.0, 10.1, 10.2};
  const std::vector<double> b{5.0, 5.1, 4.9, 5.05, 5.0, 4.95, 5.1, 5.0, 4.98, 5.02};
  const auto i1 = lab::stats::bootstrap_median_ratio_ci(a, b, 0.95, 2000, 42);
  const auto i2 = lab::stats::bootstrap_median_ratio_ci(a, b, 0.95, 2000, 42);
  EXPECT_EQ(i1.lo, i2.lo);
  EXPECT_EQ(i1.hi, i2.hi);
  const double est = st::median(a) / st::median(b);
  EXPECT_LE(i1.lo, est);
  EXPECT_GE(i1.hi, est);
  EXPECT_GT(i1.lo, 1.9);
  EXPECT_LT(i1.hi, 2.15);
  const auto i3 = lab::stats::bootstrap_median_ratio_ci(a, b, 0.95, 2000, 43);
  EXPECT_TRUE(i3.lo != i1.lo || i3.hi != i1.hi);  // another seed, other resamples
  const auto wide = lab::stats::bootstrap_median_ratio_ci(a, b, 0.99, 2000, 42);
  EXPECT_LE(wide.lo, i1.lo);
  EXPECT_GE(wide.hi, i1.hi);
}

TEST(Stats, GroupedBootstrapIsThePlainOneForOneGroupAndWidensWhenGroupsDisagree) {
  // Two "processes" per side: within each the samples agree to 1%, but the baseline's second
  // process ran 30% slower (a busy host). The optimized side is steady.
  std::vector<double> b1, b2, v1, v2;
  for (int i = 0; i < 6; ++i) {
    b1.push_back(10.0 + 0.02 * i);
    b2.push_back(13.0 + 0.02 * i);
    v1.push_back(2.0 + 0.004 * i);
    v2.push_back(2.0 + 0.004 * (5 - i));
  }
  std::vector<double> b_all(b1), v_all(v1);
  b_all.insert(b_all.end(), b2.begin(), b2.end());
  v_all.insert(v_all.end(), v2.begin(), v2.end());

  const std::vector<std::vector<double>> one_b{b_all}, one_v{v_all};
  const auto plain = lab::stats::bootstrap_median_ratio_ci(b_all, v_all, 0.95, 2000, 7);
  const auto single = lab::stats::bootstrap_median_ratio_ci_grouped(one_b, one_v, 0.95, 2000, 7);
  EXPECT_EQ(plain.lo, single.lo);
  EXPECT_EQ(plain.hi, single.hi);

  const std::vector<std::vector<double>> gb{b1, b2}, gv{v1, v2};
  const auto grouped = lab::stats::bootstrap_median_ratio_ci_grouped(gb, gv, 0.95, 2000, 7);
  const auto again = lab::stats::bootstrap_median_ratio_ci_grouped(gb, gv, 0.95, 2000, 7);
  EXPECT_EQ(grouped.lo, again.lo);
  EXPECT_EQ(grouped.hi, again.hi);
  // Resampling whole processes reaches the all-fast and all-slow baselines: the interval spans
  // both processes' ratios (about 5.0 and 6.5), wider than the pooled interval.
  EXPECT_LT(grouped.lo, 5.1);
  EXPECT_GT(grouped.hi, 6.4);
  EXPECT_GT(grouped.hi - grouped.lo, plain.hi - plain.lo);
  EXPECT_THROW(lab::stats::bootstrap_median_ratio_ci_grouped(std::vector<std::vector<double>>{{}}, gv),
               std::invalid_argument);
}

TEST(Stats, StudentTQuantileMatchesTheTables) {
  EXPECT_DOUBLE_EQ(lab::stats::student_t_quantile(0.975, 1), 12.7062);
  EXPECT_DOUBLE_EQ(lab::stats::student_t_quantile(0.975, 3), 3.1824);
  // Beyond the table: the expansion against published values.
  EXPECT_NEAR(lab::stats::student_t_quantile(0.975, 40), 2.0211, 2e-4);
  EXPECT_NEAR(lab::stats::student_t_quantile(0.975, 120), 1.9799, 2e-4);
  EXPECT_NEAR(lab::stats::student_t_quantile(0.995, 10), 3.1693, 2e-3);
  EXPECT_NEAR(lab::stats::student_t_quantile(0.95, 5), 2.0150, 2e-3);
  EXPECT_THROW(lab::stats::student_t_quantile(0.4, 3), std::invalid_argument);
  EXPECT_THROW(lab::stats::student_t_quantile(0.975, 0), std::invalid_argument);
}

// Simulated compare runs of 4 rounds (3 samples each) whose per-round speedup varies between
// processes (lognormal, 5%): the round-level t-interval covers the true speedup at its nominal
// 95%; the grouped percentile bootstrap, with only 4 rounds to draw from, does not (the reason
// --against judges host-bound rows by the t-interval).
TEST(Stats, RoundLevelTIntervalCoversAtItsLevelWhereTheBootstrapDoesNot) {
  std::mt19937_64 gen(20261123);
  std::normal_distribution<double> process(0.0, 0.05);
  const int trials = 2000, boot_trials = 1000, rounds = 4;
  const double truth = std::exp(0.3);
  int t_cover = 0, boot_cover = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<std::vector<double>> b(rounds), v(rounds);
    for (int r = 0; r < rounds; ++r) {
      const double e = process(gen);
      for (int i = 0; i < 3; ++i) {
        b[r].push_back(truth * std::exp(e) * (1 + 0.001 * (i - 1)));
        v[r].push_back(1.0 + 0.001 * (i - 1));
      }
    }
    const auto ti = lab::stats::round_ratio_t_interval(b, v);
    t_cover += ti.lo <= truth && truth <= ti.hi;
    if (t < boot_trials) {  // the bootstrap is slower: fewer trials
      const auto bi = lab::stats::bootstrap_median_ratio_ci_grouped(b, v, 0.95, 1000, static_cast<std::uint64_t>(t) + 1);
      boot_cover += bi.lo <= truth && truth <= bi.hi;
    }
  }
  const double t_rate = static_cast<double>(t_cover) / trials;
  const double boot_rate = static_cast<double>(boot_cover) / boot_trials;
  // A coverage of 95% estimated from N trials has the binomial standard error sqrt(0.95 0.05 / N):
  // 0.49% at 2000, 0.69% at 1000. Three of them either way.
  const double se_t = std::sqrt(0.95 * 0.05 / trials), se_boot = std::sqrt(0.95 * 0.05 / boot_trials);
  EXPECT_NEAR(t_rate, 0.95, 3 * se_t) << "t-interval coverage";
  EXPECT_LT(boot_rate, 0.95 - 3 * se_boot) << "bootstrap coverage";
  // Fewer than two paired rounds: no interval.
  const std::vector<std::vector<double>> one{{1.0, 1.1}};
  EXPECT_TRUE(std::isnan(lab::stats::round_ratio_t_interval(one, one).lo));
  const std::vector<std::vector<double>> two{{1.0}, {1.2}};
  EXPECT_TRUE(std::isnan(lab::stats::round_ratio_t_interval(two, one).hi));
  // Identical rounds: a zero-width interval at the speedup.
  const std::vector<std::vector<double>> b2{{4.0}, {4.0}}, v2{{2.0}, {2.0}};
  const auto same = lab::stats::round_ratio_t_interval(b2, v2);
  EXPECT_DOUBLE_EQ(same.lo, 2.0);
  EXPECT_DOUBLE_EQ(same.hi, 2.0);
}

}  // namespace

