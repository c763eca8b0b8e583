#include "lab/stats.hpp"

#include "lab/rng.hpp"

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

namespace lab::stats {

namespace {

// Number of arrangements of n x's and m y's for each value of U, by the recurrence
// c(n, m, u) = c(n - 1, m, u - m) + c(n, m - 1, u), normalised to probabilities.
std::vector<double> u_distribution(std::size_t n, std::size_t m) {
  // prev[j] holds the distribution for (i - 1, j); cur[j] for (i, j).
  const std::size_t maxu = n * m;
  std::vector<std::vector<double>> prev(m + 1, std::vector<double>(maxu + 1, 0.0)), cur = prev;
  for (std::size_t j = 0; j <= m; ++j) prev[j][0] = 1.0;  // i = 0: U = 0, one arrangement
  for (std::size_t i = 1; i <= n; ++i) {
    for (auto& row : cur) std::fill(row.begin(), row.end(), 0.0);
    cur[0][0] = 1.0;  // j = 0
    for (std::size_t j = 1; j <= m; ++j)
      for (std::size_t u = 0; u <= i * j; ++u) cur[j][u] = (u >= j ? prev[j][u - j] : 0.0) + cur[j - 1][u];
    std::swap(prev, cur);
  }
  std::vector<double> d = prev[m];
  double total = 0;
  for (double v : d) total += v;
  for (double& v : d) v /= total;
  return d;
}

}  // namespace

UTest mann_whitney_u(std::span<const double> x, std::span<const double> y, UMethod method) {
  const std::size_t n1 = x.size(), n2 = y.size();
  if (n1 == 0 || n2 == 0) throw std::invalid_argument("mann_whitney_u: empty sample");
  // Ranks of the pooled sample, ties averaged.
  std::vector<std::pair<double, int>> all;
  for (double v : x) all.push_back({v, 0});
  for (double v : y) all.push_back({v, 1});
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first < b.first; });
  const std::size_t n = all.size();
  double r1 = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    const double t = static_cast<double>(j - i);
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    for (std::size_t k = i; k < j; ++k)
      if (all[k].second == 0) r1 += rank;
    i = j;
  }
  UTest r;
  r.u = r1 - static_cast<double>(n1) * (n1 + 1) / 2.0;
  const double mn = static_cast<double>(n1) * static_cast<double>(n2);
  const bool exact = method == UMethod::exact || (method == UMethod::automatic && !ties && n1 + n2 <= 60);
  if (exact) {
    const auto d = u_distribution(n1, n2);
    // Two-sided: twice the smaller tail at the observed U.
    const auto k = static_cast<std::size_t>(std::llround(std::min(r.u, mn - r.u)));
    double tail = 0;
    for (std::size_t u = 0; u <= k; ++u) tail += d[u];
    r.p = std::min(1.0, 2.0 * tail);
    r.exact = true;
    return r;
  }
  const double mu = mn / 2.0;
  const double nn = static_cast<double>(n);
  const double var = mn / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
  const double big_u = std::max(r.u, mn - r.u);
  if (var <= 0) {
    r.p = 1.0;
    return r;
  }
  const double z = (big_u - mu - 0.5) / std::sqrt(var);
  r.p = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return r;
}

Interval bootstrap_median_ratio_ci(std::span<const double> a, std::span<const double> b, double level, int resamples,
                                   std::uint64_t seed) {
  const std::vector<double> ga(a.begin(), a.end()), gb(b.begin(), b.end());
  return bootstrap_median_ratio_ci_grouped(std::span(&ga, 1), std::span(&gb, 1), level, resamples, seed);
}

Interval bootstrap_median_ratio_ci_grouped(std::span<const std::vector<double>> a,
                                           std::span<const std::vector<double>> b, double level, int resamples,
                                           std::uint64_t seed) {
  auto usable = [](std::span<const std::vector<double>> g) {
    return !g.empty() && std::all_of(g.begin(), g.end(), [](const auto& x) { return !x.empty(); });
  };
  if (!usable(a) || !usable(b)) throw std::invalid_argument("bootstrap: empty sample or group");
  if (!(level > 0 && level < 1) || resamples < 10) throw std::invalid_argument("bootstrap: bad level or count");
  std::vector<double> ratios;
  ratios.reserve(static_cast<std::size_t>(resamples));
  std::uint64_t counter = 0;
  const std::uint64_t key = rng_detail::mix64(seed);
  auto pick = [&](std::size_t n) -> std::size_t {
    if (n == 1) return 0;  // no draw: one group a side is exactly the plain bootstrap
    return static_cast<std::size_t>(((rng_detail::bits(key, counter++) >> 32) * n) >> 32);
  };
  std::vector<double> ra, rb;
  auto resample = [&](std::span<const std::vector<double>> groups, std::vector<double>& out) {
    out.clear();
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& drawn = groups[pick(groups.size())];
      for (std::size_t i = 0; i < drawn.size(); ++i) out.push_back(drawn[pick(drawn.size())]);
    }
  };
  for (int i = 0; i < resamples; ++i) {
    resample(a, ra);
    resample(b, rb);
    ratios.push_back(median(ra) / median(rb));
  }
  const double alpha = (1.0 - level) / 2.0;
  return {quantile(ratios, alpha), quantile(ratios, 1.0 - alpha)};
}

double student_t_quantile(double p, int df) {
  if (!(p > 0.5 && p < 1) || df < 1) throw std::invalid_argument("student_t_quantile: p in (0.5, 1) and df >= 1");
  // t_{0.975, df}, df = 1..30 (any statistics table).
  static constexpr double t975[30] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060,
                                      2.2622,  2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199,
                                      2.1098,  2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
                                      2.0595,  2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (std::fabs(p - 0.975) < 1e-12 && df <= 30) return t975[df - 1];
  // The normal quantile z_p by bisection on erfc, then the expansion.
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  const double z = 0.5 * (lo + hi), z2 = z * z, n = df;
  return z + z * (z2 + 1) / (4 * n) + z * ((5 * z2 + 16) * z2 + 3) / (96 * n * n) +
         z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / (384 * n * n * n);
}

Interval round_ratio_t_interval(std::span<const std::vector<double>> a, std::span<const std::vector<double>> b,
                                double level) {
  if (!(level > 0.5 && level < 1)) throw std::invalid_argument("round_ratio_t_interval: bad level");
  if (a.size() != b.size() || a.size() < 2) return {NAN, NAN};
  std::vector<double> logs;
  for (std::size_t r = 0; r < a.size(); ++r) {
    if (a[r].empty() || b[r].empty()) return {NAN, NAN};
    logs.push_back(std::log(median(a[r]) / median(b[r])));
  }
  const double m = mean(logs);
  const double half = student_t_quantile(0.5 + level / 2, static_cast<int>(logs.size()) - 1) * stddev(logs) /
                      std::sqrt(static_cast<double>(logs.size()));
  return {std::exp(m - half), std::exp(m + half)};
}

}  // namespace lab::stats
