// Monte Carlo arithmetic (Parker 1997; the idea behind Verificarlo), for the checks whose reference
// is a long computation: a reference written once over a scalar type T runs in double (the
// reference value), in float (an fp32 stand-in for a kernel, for the tests) and in Perturbed:
// double precision in which the result of every operation is multiplied by (1 + delta), delta
// uniform in [-k u, k u] with u = 2^-24, fp32's unit roundoff, and k = 1 for + - * (a correct
// rounding), 2 for a division, 4 for exp, log, erf, tanh, sqrt (the GPU's 2-ulp approximations:
// __expf, erff, rsqrtf). A handful of such runs measure how much fp32 rounding moves each output,
// through the whole computation: its conditioning measured instead of guessed. A correct kernel's
// error at an element is about normal with the runs' deviation sigma; a check holds it to k sigma,
// k the Student's t quantile below (sigma is estimated from the runs).
//
// Used by the GPT-2 step's check (ch04_compile_vs_fused/gpt2) and the MLP training check
// (ch01_basics/mlp_reference.cpp). Host code.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "lab/verify.hpp"

namespace lab::mc {

constexpr double u = fp32::kUnitRoundoff;

// The perturbations' source: a splitmix64 stream, one per run, in the running thread's state (so
// that runs go side by side on threads and each run's result is the same whatever the count).
// A run starts it at stream_start(seed, run).
inline thread_local std::uint64_t mc_state = 0;
constexpr std::uint64_t kStreamStep = 0x9e3779b97f4a7c15ull;
inline double noise(double k) {
  std::uint64_t z = (mc_state += kStreamStep);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double unit = double(z >> 11) * 0x1p-53;  // [0, 1)
  return 1 + k * u * (2 * unit - 1);
}
// The draw noise(0) makes, whose factor is exactly 1: the stream advanced as by that draw, nothing
// computed (a run that skips it is the run that draws it, bit for bit).
inline void skip_draw() { mc_state += kStreamStep; }
// Where run `run` of a check seeded `seed` starts its stream: a hash of both, so that no two runs'
// streams overlap. (Starts r increments apart made run r run 0's stream shifted by r draws, and
// where an element's error came from a few operations every run drew from one window of it: 8
// runs of the GPT-2 check agreed to 1/17 of their true spread, a 35 sigma false alarm.)
std::uint64_t stream_start(std::uint64_t seed, int run);

struct Perturbed {
  double v = 0;
  Perturbed() = default;
  Perturbed(double x) : v(x) {}  // NOLINT: an exact input converts
};
inline Perturbed operator+(Perturbed a, Perturbed b) { return (a.v + b.v) * noise(1); }
inline Perturbed operator-(Perturbed a, Perturbed b) { return (a.v - b.v) * noise(1); }
inline Perturbed operator*(Perturbed a, Perturbed b) { return a.v * b.v * noise(1); }
inline Perturbed operator/(Perturbed a, Perturbed b) { return a.v / b.v * noise(2); }

// ---- The scalar types' operations, by overload ------------------------------------------------

template <class T>
T cst(double c);
template <>
inline double cst<double>(double c) { return c; }
template <>
inline float cst<float>(double c) { return static_cast<float>(c); }
template <>
inline Perturbed cst<Perturbed>(double c) { return c * noise(1); }

inline double exp_(double x) { return std::exp(x); }
inline float exp_(float x) { return std::exp(x); }
inline Perturbed exp_(Perturbed x) { return std::exp(x.v * noise(2)) * noise(4); }  // the argument scaled by log2 e
inline double log_(double x) { return std::log(x); }
inline float log_(float x) { return std::log(x); }
inline Perturbed log_(Perturbed x) { return std::log(x.v) * noise(4); }
inline double sqrt_(double x) { return std::sqrt(x); }
inline float sqrt_(float x) { return std::sqrt(x); }
inline Perturbed sqrt_(Perturbed x) { return std::sqrt(x.v) * noise(4); }
inline double erf_(double x) { return std::erf(x); }
inline float erf_(float x) { return std::erf(x); }
inline Perturbed erf_(Perturbed x) { return std::erf(x.v) * noise(4); }
inline double tanh_(double x) { return std::tanh(x); }
inline float tanh_(float x) { return std::tanh(x); }
inline Perturbed tanh_(Perturbed x) { return std::tanh(x.v) * noise(4); }
inline double max_(double a, double b) { return std::max(a, b); }
inline float max_(float a, float b) { return std::max(a, b); }
inline Perturbed max_(Perturbed a, Perturbed b) { return std::max(a.v, b.v); }

// A value of any of the three types, in double.
inline double value(double x) { return x; }
inline double value(float x) { return x; }
inline double value(Perturbed x) { return x.v; }

// ---- The element test's factor ----------------------------------------------------------------

// k for a two-sided tail p with `runs` degrees of freedom: Student's t quantile. An element whose
// error is normal with deviation sigma, over sigma's estimate from `runs` runs (the root mean
// square of their deviations), is t-distributed with `runs` degrees of freedom; it lies beyond k
// estimated sigmas with probability p. At 16 runs and p = 1e-12, k = 19.9; at 8 it would be 76
// (the t distribution's tail is heavy at few degrees of freedom).
double element_factor(int runs, double p);

// The degrees of freedom of an output's L2 error, whose elements' deviations are sigma: (sum
// sigma^2)^2 / sum sigma^4, Satterthwaite's count of equal independent terms. Each run's squared
// L2 error is about sigma^2 times a chi-square with that many; where they are many (32 or more),
// the largest run's L2 error is a steady yardstick for a kernel's.
double l2_dof(std::span<const double> sigma);

// ---- One output against the runs --------------------------------------------------------------

// Every element within its slack (k sigma, and whatever the caller's model adds), and, where the
// output's error has min_dof degrees of freedom or more (l2_dof of sigma), its L2 error within
// l2_factor times l2_allowed (the runs' largest L2 error): the verdict, and that L2 error over its
// bound (l2_ratio; -1 where the output has too few degrees of freedom for the test). The element
// test's verdict decides first; the L2 test fails a verdict that passed it, with its reason.
struct OutputVerdict {
  Verdict verdict;
  double l2_ratio = -1;
  double l2_error = 0;  // ||got - ref||_2
};
OutputVerdict judge_output(const std::string& what, std::span<const float> got, std::span<const double> ref,
                           std::span<const double> sigma, std::span<const double> slack, double l2_allowed, int runs,
                           double l2_factor, double min_dof, const Tolerance& tol);

// ---- Running the runs side by side ------------------------------------------------------------

// The threads a check's runs may take: the machine's (LAB_REFERENCE_THREADS, a positive integer,
// overrides; std::invalid_argument naming it when it is not one), at most `tasks`.
int reference_threads(int tasks);

// Runs task(i) for every i in [first, last) on `threads` threads, the caller's among them; each
// thread takes the next index until none is left. A task's exception is rethrown, the first
// index's, once every thread is done.
template <class Task>
void run_tasks(int first, int last, int threads, const Task& task) {
  std::vector<std::exception_ptr> failed(std::size_t(last - first));
  std::atomic<int> next{first};
  auto work = [&] {
    for (int i; (i = next.fetch_add(1)) < last;) {
      try {
        task(i);
      } catch (...) {
        failed[std::size_t(i - first)] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (int t = 1; t < std::min(threads, last - first); ++t) helpers.emplace_back(work);
    work();
  }
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace lab::mc
