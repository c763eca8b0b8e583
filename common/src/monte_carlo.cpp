#include "lab/monte_carlo.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "lab/rng.hpp"

namespace lab::mc {

std::uint64_t stream_start(std::uint64_t seed, int run) { return rng_detail::bits(seed, std::uint64_t(run)); }

namespace {

// P(|t| > k) for Student's t with nu degrees of freedom: its density integrated by Simpson's rule
// over [k, k + 200 k] (the rest is below 1e-15 of the density's mass for nu >= 8).
double t_two_sided_tail(double k, int nu) {
  const double lc = std::lgamma((nu + 1) / 2.0) - std::lgamma(nu / 2.0) - 0.5 * std::log(nu * M_PI);
  auto pdf = [&](double t) { return std::exp(lc - (nu + 1) / 2.0 * std::log1p(t * t / nu)); };
  const int n = 200000;
  const double hi = 201 * k, h = (hi - k) / n;
  double s = pdf(k) + pdf(hi);
  for (int i = 1; i < n; ++i) s += (i % 2 ? 4 : 2) * pdf(k + i * h);
  return 2 * s * h / 3;
}

}  // namespace

double element_factor(int runs, double p) {
  double lo = 1, hi = 1e4;  // bisection on the tail, which falls monotonically
  for (int i = 0; i < 60; ++i) {
    const double mid = std::sqrt(lo * hi);
    (t_two_sided_tail(mid, runs) > p ? lo : hi) = mid;
  }
  return hi;
}

double l2_dof(std::span<const double> sigma) {
  double s2 = 0, s4 = 0;
  for (const double s : sigma) s2 += s * s, s4 += s * s * s * s;
  return s4 > 0 ? s2 * s2 / s4 : 0;
}

OutputVerdict judge_output(const std::string& what, std::span<const float> got, std::span<const double> ref,
                           std::span<const double> sigma, std::span<const double> slack, double l2_allowed, int runs,
                           double l2_factor, double min_dof, const Tolerance& tol) {
  OutputVerdict o{compare(got, ref, tol, what, {}, slack)};
  double sq = 0;
  for (std::size_t i = 0; i < got.size(); ++i) sq += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
  o.l2_error = std::sqrt(sq);
  const double dof = l2_dof(sigma);
  if (dof < min_dof) return o;
  const double bound = l2_factor * l2_allowed;
  o.l2_ratio = bound > 0 ? o.l2_error / bound : (sq > 0 ? INFINITY : 0);
  if (o.verdict.pass && !(o.l2_ratio <= 1)) {  // the ratio reported and the test are one number
    o.verdict.pass = false;
    std::ostringstream why;
    why << what << ": L2 error " << o.l2_error << " above " << l2_factor << " x " << l2_allowed << " (the largest of "
        << runs << " Monte Carlo runs; " << std::lround(dof) << " degrees of freedom)";
    o.verdict.reason = why.str();
  }
  return o;
}

int reference_threads(int tasks) {
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* s = std::getenv("LAB_REFERENCE_THREADS"); s && *s) {
    char* end = nullptr;
    const long n = std::strtol(s, &end, 10);
    if (*end != '\0' || n < 1 || n > 4096)
      throw std::invalid_argument(std::string("LAB_REFERENCE_THREADS: '") + s +
                                  "' is not a thread count (a whole number from 1 to 4096)");
    threads = int(n);
  }
  return std::max(1, std::min(threads, tasks));
}

}  // namespace lab::mc
