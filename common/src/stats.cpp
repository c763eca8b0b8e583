#include "lab/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace lab::stats {

namespace {
void need(std::span<const double> x, std::size_t n, const char* what) {
  if (x.size() < n) throw std::invalid_argument(std::string(what) + ": too few samples");
}
}  // namespace

double mean(std::span<const double> x) {
  need(x, 1, "mean");
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double quantile(std::span<const double> x, double q) {
  need(x, 1, "quantile");
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument("quantile: q must be in [0, 1]");
  std::vector<double> s(x.begin(), x.end());
  std::sort(s.begin(), s.end());
  const double h = (static_cast<double>(s.size()) - 1.0) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (h - static_cast<double>(lo)) * (s[hi] - s[lo]);
}

double median(std::span<const double> x) { return quantile(x, 0.5); }

double stddev(std::span<const double> x) {
  need(x, 2, "stddev");
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

double cv(std::span<const double> x) { return stddev(x) / mean(x); }

double geomean(std::span<const double> x) {
  need(x, 1, "geomean");
  double s = 0;
  for (double v : x) {
    if (!(v > 0)) throw std::invalid_argument("geomean: values must be positive");
    s += std::log(v);
  }
  return std::exp(s / static_cast<double>(x.size()));
}

double min(std::span<const double> x) {
  need(x, 1, "min");
  return *std::min_element(x.begin(), x.end());
}

double max(std::span<const double> x) {
  need(x, 1, "max");
  return *std::max_element(x.begin(), x.end());
}

}  // namespace lab::stats
