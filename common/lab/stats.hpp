// Small statistics for timing samples: the lab reports medians with a coefficient of variation,
// never a bare mean of noisy samples.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lab::stats {

double mean(std::span<const double> x);
double median(std::span<const double> x);
// Sample quantile with linear interpolation between order statistics (R's type 7); q in [0, 1].
double quantile(std::span<const double> x, double q);
double stddev(std::span<const double> x);          // sample standard deviation (n - 1)
double cv(std::span<const double> x);              // stddev / mean
double geomean(std::span<const double> x);         // all values must be > 0
double min(std::span<const double> x);
double max(std::span<const double> x);

}  // namespace lab::stats

namespace lab::stats {

// Mann-Whitney U test, two-sided. u is the statistic of x (the number of pairs with x > y, ties
// counting one half). exact: the p-value comes from the exact distribution of U (used when there
// are no ties and the samples are small); otherwise from the normal approximation with tie and
// continuity corrections. Matches scipy.stats.mannwhitneyu(x, y, alternative="two-sided").
enum class UMethod { automatic, exact, asymptotic };
struct UTest {
  double u = 0;
  double p = 1;
  bool exact = false;
};
UTest mann_whitney_u(std::span<const double> x, std::span<const double> y, UMethod method = UMethod::automatic);

// Percentile bootstrap confidence interval for median(a) / median(b): each resample draws both
// samples with replacement. Reproducible for a seed.
struct Interval {
  double lo = 0, hi = 0;
};
Interval bootstrap_median_ratio_ci(std::span<const double> a, std::span<const double> b, double level = 0.95,
                                   int resamples = 4000, std::uint64_t seed = 1);

// The same interval when each side's samples come in groups (compare's rounds: one process each):
// a two-stage bootstrap that first draws whole groups with replacement, then samples within each
// drawn group. Samples of one process share that process's state, so they are not independent:
// when the groups disagree the interval widens to say so, where the plain bootstrap would report
// the within-process spread only. With one group a side it is the plain bootstrap above.
Interval bootstrap_median_ratio_ci_grouped(std::span<const std::vector<double>> a,
                                           std::span<const std::vector<double>> b, double level = 0.95,
                                           int resamples = 4000, std::uint64_t seed = 1);

// Student's t quantile t_{p, df} for p in (0.5, 1): exact table values for df <= 30 at p = 0.975,
// otherwise the Cornish-Fisher expansion in 1/df (error under 1e-3 from df = 5 on).
double student_t_quantile(double p, int df);

// The round-level interval of a speedup when the two sides ran in paired rounds (compare's ABAB
// rounds: round r of a and round r of b ran one after the other). Each round gives one speedup,
// median(a_r) / median(b_r); the interval is the t-interval of their logarithms' mean, exp(m +- t
// s / sqrt(n)) with n - 1 degrees of freedom. With few rounds a percentile bootstrap over rounds
// cannot reach its nominal coverage (4 rounds have only 35 distinct resamples, and none wider than
// the rounds themselves); the t quantile (12.7 at n = 2, 3.18 at n = 4) widens it honestly. Needs
// the same number of groups a side, at least two; NaN bounds otherwise.
Interval round_ratio_t_interval(std::span<const std::vector<double>> a, std::span<const std::vector<double>> b,
                                double level = 0.95);

}  // namespace lab::stats
