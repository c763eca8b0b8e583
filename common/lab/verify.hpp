// Verification: compare a result with a reference computed in double, element by element and as a
// whole, and say exactly what is wrong. NaN and Inf never pass (outputs are poisoned with NaN
// before every run, so an unwritten element cannot pass either).
//
// An output that is a sum of many terms is judged by its conditioning: the reference computes,
// beside each value, the rounding error a correct fp32 evaluation may make there (its "slack",
// from fp32::sum_error and the sum of the terms' magnitudes), and the bound grows by it. A
// cancelling sum is then not held to a relative error its arithmetic cannot meet, and a well
// conditioned one still is. An output that is identically zero is held to |got| <= atol + slack
// element by element (exactly 0 under the exact tolerance); the relative L2 error is undefined there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <limits>
#include <vector>

namespace lab {

// Passing needs, for every element, |got - ref| <= atol + rtol * |ref|, and for the whole output
// ||got - ref||_2 / ||ref||_2 <= max_rel_l2.
struct Tolerance {
  double atol = 0, rtol = 0, max_rel_l2 = 0;
  const char* name = "custom";

  static Tolerance exact() { return {0, 0, 0, "exact"}; }                // copies, permutations
  static Tolerance fp32() { return {1e-5, 1e-5, 1e-5, "fp32"}; }         // fp32 arithmetic
  static Tolerance tf32() { return {2e-3, 2e-2, 1e-3, "tf32"}; }         // tensor cores, fp32 inputs
  static Tolerance fp16() { return {2e-3, 1e-2, 2e-3, "fp16"}; }         // fp16 inputs, fp32 accumulate
  static Tolerance bf16() { return {1e-2, 5e-2, 1e-2, "bf16"}; }         // bf16 inputs, fp32 accumulate
  // For an approximation whose guarantee is a bound on every element (|got - ref| <= atol +
  // rtol |ref|) and nothing else: no relative-L2 bound, which for a handful of elements near zero
  // would measure where the inputs happened to fall rather than the approximation.
  static Tolerance per_element(double atol, double rtol, const char* name) {
    return {atol, rtol, std::numeric_limits<double>::infinity(), name};
  }
};

// fp32 rounding, for the references' slack.
namespace fp32 {
inline constexpr double kUnitRoundoff = 0x1p-24;  // u: a rounding to fp32 errs by at most u relative
// The lambda of the probabilistic bound below: the bound fails with probability at most
// 2 n exp(-lambda^2 (1 - u)^2 / 2), about 4e-22 n for lambda = 10.
inline constexpr double kLambda = 10;
// A bound on |computed - exact| / sum_i |t_i| for a sum of terms t_i computed in fp32 in any order
// (sequential, pairwise, blocked, atomics), where every term passes through at most n roundings
// on its way into the result (an inner product of n terms: n - 1 additions and its product). The
// smaller of the deterministic gamma_n = n u / (1 - n u), which always holds, and Higham and Mary's
// probabilistic gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1 (SIAM J. Sci.
// Comput. 41(5), 2019), which holds with the probability above when rounding errors behave as
// independent, zero-mean random variables (random inputs; not a sum that stagnates, such as 2^28
// positive terms added one by one into one fp32 accumulator, which no bound should accept).
double sum_error(double n, double u = kUnitRoundoff);
}  // namespace fp32

// A value of a reference sum with the sum of its terms' magnitudes: value += t, magnitude += |t|.
struct Sum {
  double value = 0, magnitude = 0;
  void add(double t) {
    value += t;
    magnitude += t < 0 ? -t : t;
  }
};

struct Mismatch {
  std::size_t index;
  double got, expected;
};

struct Verdict {
  std::string what = "output";  // which output this judges ("out", "dx", ...)
  bool pass = false;
  std::size_t count = 0;        // elements compared
  std::size_t bad = 0;          // elements out of tolerance (NaN and Inf included)
  std::size_t nan = 0, inf = 0; // non-finite values in the result
  double max_abs = 0, max_rel = 0, rel_l2 = 0;
  // The largest |got - ref| over that element's bound (atol + rtol |ref| + slack): how close the
  // worst element came to failing, 1 at the bound (infinite where a zero bound was missed).
  double worst_share = 0;
  std::size_t worst_index = 0;  // element with the largest absolute error
  std::vector<Mismatch> first;  // the first few bad elements, in index order
  std::vector<std::int64_t> dims;  // row-major extents, to print indices as coordinates
  std::string reason;           // why it failed; empty when it passed
  std::string note;             // what a further check of the output found (printed pass or fail)
  Tolerance tol;
  bool conditioned = false;     // the bound included the reference's per-element slack
  bool zero_reference = false;  // the reference was identically zero (no relative L2 bound)
  // In a combined verdict that is not all zero: the parts whose reference was identically zero
  // ("dq", "dq+dk"), left out of rel_l2 (against zero it is infinite or undefined, not an error).
  std::string zero_parts;

  std::string summary() const;  // one line: PASS/FAIL, errors, tolerance
  std::string details() const;  // summary plus the first mismatches, element by element
  std::string index_text(std::size_t flat) const;  // "[3, 17]" with dims, "[1234]" without

  // Combine with another output's verdict: passes when both pass; the worst errors are kept.
  Verdict& also(const Verdict& other);
};

inline constexpr std::size_t kMismatchesKept = 8;

// got and ref must have the same length. dims (optional) are the row-major extents of the output.
// slack (optional, the length of ref, each >= 0): the rounding error a correct computation may
// make at each element beyond the tolerance, from the arithmetic (see fp32::sum_error). With it,
// element i passes when |got - ref| <= atol + rtol |ref| + slack_i, and the whole when
// ||got - ref||_2 <= max_rel_l2 ||ref||_2 + ||slack||_2.
Verdict compare(std::span<const float> got, std::span<const double> ref, Tolerance tol,
                std::string what = "output", std::vector<std::int64_t> dims = {},
                std::span<const double> slack = {});
Verdict compare(std::span<const double> got, std::span<const double> ref, Tolerance tol,
                std::string what = "output", std::vector<std::int64_t> dims = {},
                std::span<const double> slack = {});
Verdict compare(std::span<const std::int32_t> got, std::span<const std::int32_t> ref,
                std::string what = "output", std::vector<std::int64_t> dims = {});

}  // namespace lab
