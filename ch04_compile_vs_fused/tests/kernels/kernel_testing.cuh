// What the chapter's kernel tests (tests/kernels/*.cu) share: bf16 conversions, device copies,
// random inputs, the per-element judge with its slack, and EXPECT_PASSES, which prints each
// verdict's line (its worst element's share of the bound), so that a run shows how close a correct
// kernel comes to its bound, not only that it passed. Included by each test file, inside nothing.
#pragma once

#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cstdio>
#include <span>
#include <vector>

#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/verify.hpp"

namespace {

using bf16 = __nv_bfloat16;
constexpr double kU = lab::fp32::kUnitRoundoff;  // 2^-24
constexpr double kUb = 0x1p-8;                    // bf16's unit roundoff: 8 significant bits
using lab::fp32::sum_error;

float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }
std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16(x[i]);
  return y;
}
std::vector<float> to_float(const std::vector<bf16>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = __bfloat162float(x[i]);
  return y;
}
template <class T>
lab::DeviceBuffer<T> device(const std::vector<T>& host) {
  lab::DeviceBuffer<T> d(host.size());
  d.upload(host);
  return d;
}
std::vector<float> uniform(lab::Rng& rng, std::size_t n, float lo, float hi) {
  std::vector<float> x(n);
  rng.uniform(std::span<float>(x), lo, hi);
  return x;
}

// An output's bound: rtol |ref| + slack (per element), no relative-L2 bound (the slack is the claim).
lab::Verdict judge(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& slack,
                   double rtol, const char* what) {
  return lab::compare(got, ref, lab::Tolerance::per_element(0, rtol, what), what, {}, slack);
}
// A value rounded to bf16 from an fp32 value that errs by e: |out - ref| <= u_b |ref| + (1 + u_b) e.
std::vector<double> rounded_slack(const std::vector<double>& e) {
  std::vector<double> s(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) s[i] = (1 + kUb) * e[i];
  return s;
}

// EXPECT_TRUE of a verdict, its line printed first; `seed` (the test's) named for reproducing it.
#define EXPECT_PASSES(verdict)                                                            \
  do {                                                                                    \
    const lab::Verdict v_ = (verdict);                                                    \
    std::printf("  %s\n", v_.summary().c_str());                                          \
    EXPECT_TRUE(v_.pass) << v_.details() << "\n(reproduce with LAB_SEED=" << seed << ")"; \
  } while (0)

}  // namespace
