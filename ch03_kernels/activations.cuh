// The activation topics: GELU (erf form) and Swish (SiLU), forward and backward, over a large fp32
// array. Each is one read and one write per element forward (8 bytes), two reads and a write
// backward (12 bytes), and a few dozen instructions of arithmetic: memory-bound on any GPU, so
// the yardstick is the copy bandwidth (`%peak_bw`). The functions are here; the variants choose
// how to read memory (elementwise.cuh).
//   gelu(x)  = x * Phi(x) = 0.5 x erfc(-x / sqrt 2)      gelu'(x)  = Phi(x) + x phi(x)
//   swish(x) = x * sigmoid(x)                            swish'(x) = s (1 + x (1 - s)), s = sigmoid(x)
// erfc(-x/sqrt 2) rather than 1 + erf(x/sqrt 2): for very negative x the latter subtracts two
// nearly equal numbers and loses every digit.
// Each topic also exists on bf16 storage (gelu_bf16, gelu_backward_bf16, swish_bf16,
// swish_backward_bf16): x, dy and the output bf16, the arithmetic fp32 (as PyTorch computes these
// functions on bf16 tensors), half the bytes. Its check: the reference in double from the bf16
// inputs (exact in fp32), and a bound that is fp32's plus the output's one rounding to bf16, at most
// 2^-8 of the value (8 significant bits, round to nearest). And on fp16 storage (gelu_fp16, ...):
// the bf16 files' fp16 twins (lab::Stored16), the rounding 2^-11 of the value, or 2^-25 absolutely
// below fp16's normal range (lab::StorageOf).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "elementwise.cuh"
#include "lab/lab.hpp"
#include "lab/storage.hpp"

namespace act {

struct GeluOp {
  static constexpr const char* name = "gelu";
  static constexpr const char* backward_name = "gelu_backward";
  static constexpr const char* name_bf16 = "gelu_bf16";
  static constexpr const char* backward_name_bf16 = "gelu_backward_bf16";
  static constexpr const char* name_fp16 = "gelu_fp16";
  static constexpr const char* backward_name_fp16 = "gelu_backward_fp16";
  __device__ float operator()(float x) const { return 0.5f * x * erfcf(-x * 0.70710678118654752f); }
  __device__ float operator()(float x, float dy) const {
    const float cdf = 0.5f * erfcf(-x * 0.70710678118654752f);
    const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
  static double reference(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
  static double derivative(double x) {
    return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
  }
};

struct SwishOp {
  static constexpr const char* name = "swish";
  static constexpr const char* backward_name = "swish_backward";
  static constexpr const char* name_bf16 = "swish_bf16";
  static constexpr const char* backward_name_bf16 = "swish_backward_bf16";
  static constexpr const char* name_fp16 = "swish_fp16";
  static constexpr const char* backward_name_fp16 = "swish_backward_fp16";
  __device__ float operator()(float x) const { return x / (1.f + expf(-x)); }
  __device__ float operator()(float x, float dy) const {
    const float s = 1.f / (1.f + expf(-x));
    return dy * (s * (1.f + x * (1.f - s)));
  }
  static double reference(double x) { return x / (1.0 + std::exp(-x)); }
  static double derivative(double x) {
    const double s = 1.0 / (1.0 + std::exp(-x));
    return s * (1.0 + x * (1.0 - s));
  }
};

// erfc(z) to the precision a bf16 result needs, for the bf16 GELUs' final variants (the fp32 topics
// keep erfcf, held to fp32's bound), and an fp16 one too (2^-11: the fit's error is 4000 times less). Numerical Recipes' erfcc, a Chebyshev fit in
// t = 1 / (1 + |z|/2): erfc(|z|) = t exp(-z^2 + P(t)), P of degree 9, relative error below 1.2e-7;
// erfc(z) = 2 - erfc(|z|) for z < 0. One reciprocal, nine FMAs, one exponential, no branch (the
// select is a predicated move). On the device the reciprocal and the exponential are the fast
// approximations (__fdividef, __expf); on the host (the CPU test that holds every bf16 input to
// the check's bound, tests/cpu/activations_16bit_check_test.cu) their correctly rounded forms.
__host__ __device__ inline float erfc_bf16(float z) {
  const float a = fabsf(z);
#if defined(__CUDA_ARCH__)
  const float t = __fdividef(1.f, fmaf(0.5f, a, 1.f));
#else
  const float t = 1.f / fmaf(0.5f, a, 1.f);
#endif
  float p = 0.17087277f;
  p = fmaf(t, p, -0.82215223f);
  p = fmaf(t, p, 1.48851587f);
  p = fmaf(t, p, -1.13520398f);
  p = fmaf(t, p, 0.27886807f);
  p = fmaf(t, p, -0.18628806f);
  p = fmaf(t, p, 0.09678418f);
  p = fmaf(t, p, 0.37409196f);
  p = fmaf(t, p, 1.00002368f);
  p = fmaf(t, p, -1.26551223f);
#if defined(__CUDA_ARCH__)
  const float e = t * __expf(fmaf(-a, a, p));
#else
  const float e = t * std::exp(fmaf(-a, a, p));
#endif
  return z >= 0.f ? e : 2.f - e;
}

// GELU and its gradient on erfc_bf16 (the bf16 topics' final variants): gelu(x) = 0.5 x erfc(z),
// gelu'(x) = 0.5 erfc(z) + x phi(x), z = -x / sqrt 2.
struct GeluBf16Op {
  __host__ __device__ float operator()(float x) const { return 0.5f * x * erfc_bf16(-x * 0.70710678118654752f); }
  __host__ __device__ float operator()(float x, float dy) const {
#if defined(__CUDA_ARCH__)
    const float pdf = 0.39894228040143268f * __expf(-0.5f * x * x);
#else
    const float pdf = 0.39894228040143268f * std::exp(-0.5f * x * x);
#endif
    return dy * fmaf(x, pdf, 0.5f * erfc_bf16(-x * 0.70710678118654752f));
  }
};

// What a topic's storage type changes: its name, its bytes, and the check's bound (above; the
// rounding's share is lab::StorageOf's, common/lab/storage.hpp).
template <class T>
struct Storage : lab::StorageOf<T> {
  using Base = lab::StorageOf<T>;
  template <class Op>
  static constexpr const char* name() {
    return Base::pick(Op::name, Op::name_bf16, Op::name_fp16);
  }
  template <class Op>
  static constexpr const char* backward_name() {
    return Base::pick(Op::backward_name, Op::backward_name_bf16, Op::backward_name_fp16);
  }
  // fp32's bound, and for 16 bits the rounding of the result on top: |rounded - v| <= 2^-8 |v| in
  // bf16; in fp16 2^-11 |v|, or 2^-25 below its normal range.
  static lab::Tolerance tolerance() { return Base::fp32_rounded(); }
};

}  // namespace act

// What every activation topic shares: one flat array (elementwise.cuh).
using ActivationShapes = ew::FlatShapes;

// y = op(x), x and y stored as T (float, bf16 or fp16).
template <class Op, class T = float>
struct Activation : ActivationShapes {
  using S = act::Storage<T>;
  static constexpr const char* name = S::template name<Op>();
  static constexpr bool reads_declared_tolerance = true;  // a variant's own bound (optimized_gelu_tanh)
  static lab::Work work(const lab::Shape& s) {
    constexpr double b = sizeof(T);
    return {.bytes = 2 * b * double(s[0]), .flops = 0, .written = b * double(s[0])};  // x in, y out
  }

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<T> x, y;
    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), y(n) {
      rng.uniform(x, -6.f, 6.f);  // both tails: where erfc and exp must not lose digits
    }
    Problem(const lab::Shape& s, lab::Borrowed) : n(static_cast<std::size_t>(s[0])) {}
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = S::to_float(x.download());
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = Op::reference(hx[i]);
      return S::check(S::to_float(y.download()), ref, tolerance_or(S::tolerance()), "y");
    }
  };
};

// dx = dy * op'(x), x, dy and dx stored as T.
template <class Op, class T = float>
struct ActivationBackward : ActivationShapes {
  using S = act::Storage<T>;
  static constexpr const char* name = S::template backward_name<Op>();
  static constexpr bool reads_declared_tolerance = true;
  static lab::Work work(const lab::Shape& s) {
    constexpr double b = sizeof(T);
    return {.bytes = 3 * b * double(s[0]), .flops = 0, .written = b * double(s[0])};  // x, dy in; dx out
  }

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<T> x, dy, dx;
    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), dy(n), dx(n) {
      rng.uniform(x, -6.f, 6.f);
      rng.uniform(dy, -1.f, 1.f);
    }
    Problem(const lab::Shape& s, lab::Borrowed) : n(static_cast<std::size_t>(s[0])) {}
    void poison(cudaStream_t s) override { lab::poison(dx, s); }
    lab::Verdict verify() override {
      const auto hx = S::to_float(x.download()), hg = S::to_float(dy.download());
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = double(hg[i]) * Op::derivative(hx[i]);
      return S::check(S::to_float(dx.download()), ref, tolerance_or(S::tolerance()), "dx");
    }
  };
};

using Gelu = Activation<act::GeluOp>;
using GeluBackward = ActivationBackward<act::GeluOp>;
using Swish = Activation<act::SwishOp>;
using SwishBackward = ActivationBackward<act::SwishOp>;
using GeluBf16 = Activation<act::GeluOp, __nv_bfloat16>;
using GeluBackwardBf16 = ActivationBackward<act::GeluOp, __nv_bfloat16>;
using SwishBf16 = Activation<act::SwishOp, __nv_bfloat16>;
using SwishBackwardBf16 = ActivationBackward<act::SwishOp, __nv_bfloat16>;
using GeluFp16 = Activation<act::GeluOp, __half>;
using GeluBackwardFp16 = ActivationBackward<act::GeluOp, __half>;
using SwishFp16 = Activation<act::SwishOp, __half>;
using SwishBackwardFp16 = ActivationBackward<act::SwishOp, __half>;
// The topics of a file named for bf16: bf16, or fp16 in its fp16 twin (lab::Stored16).
using Gelu16 = Activation<act::GeluOp, lab::Stored16>;
using GeluBackward16 = ActivationBackward<act::GeluOp, lab::Stored16>;
using Swish16 = Activation<act::SwishOp, lab::Stored16>;
using SwishBackward16 = ActivationBackward<act::SwishOp, lab::Stored16>;
