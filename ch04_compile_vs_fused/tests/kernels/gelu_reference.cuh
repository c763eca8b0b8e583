// The GELU kernels' references for the chapter's kernel tests (row_kernels_test.cu,
// gelu_product_test.cu): gelu'(x) and gelu(x) in double, and the bound on each one's fp32 error as
// the kernels compute it (gpt2/fused/kernels.cuh: gelu_erf, gelu_of, dgelu_of). Included after
// kernel_testing.cuh (kU), inside nothing.
#pragma once

#include <cmath>
#include <numbers>

#include "tests/kernels/kernel_testing.cuh"

namespace {

// gelu'(x) = Phi(x) + x phi(x) as dgelu computes it: Phi = 0.5 (1 + erff(x c)), c = 1/sqrt 2 in
// fp32 (x c errs by 2u relative: c's rounding and the product's; erf' <= 2/sqrt pi), erff within
// 2 ulp (4u relative), 1 + erf one rounding; phi = expf(-0.5 x x) 0.3989...: x x one rounding
// (the exponent errs by u x^2 / 2 absolute), expf within 2 ulp, the constant and the product two;
// x phi one, the sum one; g times it one.
inline double dgelu_ref(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi); }
inline double dgelu_error(double x) {
  const double erf = std::erf(x / std::sqrt(2.0)), cdf = 0.5 * (1 + erf);
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  const double e_cdf = 0.5 * (4 * kU * std::fabs(erf) + 2 / std::sqrt(std::numbers::pi) * 2 * kU * std::fabs(x) / std::sqrt(2.0)) +
                       kU * cdf;
  const double e_pdf = pdf * (4 * kU + 0.5 * kU * x * x + 2 * kU);
  return (e_cdf + std::fabs(x) * e_pdf + kU * std::fabs(x) * pdf + kU * (cdf + std::fabs(x) * pdf)) * (1 + 8 * kU);
}

// gelu(x) = 0.5 x (1 + erff(x c)) as the kernels compute it: erff's argument and value as in
// dgelu_error, 1 + erf one rounding, 0.5 x exact, the product one.
inline double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_error(double x) {
  const double erf = std::erf(x / std::sqrt(2.0));
  const double e_one_plus =
      4 * kU * std::fabs(erf) + 2 / std::sqrt(std::numbers::pi) * 2 * kU * std::fabs(x) / std::sqrt(2.0) + kU * (1 + erf);
  return (0.5 * std::fabs(x) * e_one_plus + kU * std::fabs(gelu_ref(x))) * (1 + 8 * kU);
}

}  // namespace
