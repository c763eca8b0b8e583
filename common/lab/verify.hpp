// Verification: compare a result with a reference computed in double, element by element and as a
// whole, and say exactly what is wrong. NaN and Inf never pass; an all-zero reference is refused,
// because a check against zeros cannot tell a right kernel from one that writes nothing.
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
  std::size_t worst_index = 0;  // element with the largest absolute error
  std::vector<Mismatch> first;  // the first few bad elements, in index order
  std::vector<std::int64_t> dims;  // row-major extents, to print indices as coordinates
  std::string reason;           // why it failed; empty when it passed
  Tolerance tol;

  std::string summary() const;  // one line: PASS/FAIL, errors, tolerance
  std::string details() const;  // summary plus the first mismatches, element by element
  std::string index_text(std::size_t flat) const;  // "[3, 17]" with dims, "[1234]" without

  // Combine with another output's verdict: passes when both pass; the worst errors are kept.
  Verdict& also(const Verdict& other);
};

inline constexpr std::size_t kMismatchesKept = 8;

// got and ref must have the same length. dims (optional) are the row-major extents of the output.
Verdict compare(std::span<const float> got, std::span<const double> ref, Tolerance tol,
                std::string what = "output", std::vector<std::int64_t> dims = {});
Verdict compare(std::span<const double> got, std::span<const double> ref, Tolerance tol,
                std::string what = "output", std::vector<std::int64_t> dims = {});
Verdict compare(std::span<const std::int32_t> got, std::span<const std::int32_t> ref,
                std::string what = "output", std::vector<std::int64_t> dims = {});

}  // namespace lab
