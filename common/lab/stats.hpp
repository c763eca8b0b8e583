// Small statistics for timing samples: the lab reports medians with a coefficient of variation,
// never a bare mean of noisy samples.
#pragma once

#include <span>

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
