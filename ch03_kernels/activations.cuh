// The activation topics: GELU (erf form) and Swish (SiLU), forward and backward, over a large fp32
// array. Each is one read and one write per element forward (8 bytes), two reads and a write
// backward (12 bytes), and a few dozen instructions of arithmetic: memory-bound on any GPU, so
// the yardstick is the copy bandwidth (`%peak_bw`). The functions are here; the variants choose
// how to read memory (elementwise.cuh).
//   gelu(x)  = x * Phi(x) = 0.5 x erfc(-x / sqrt 2)      gelu'(x)  = Phi(x) + x phi(x)
//   swish(x) = x * sigmoid(x)                            swish'(x) = s (1 + x (1 - s)), s = sigmoid(x)
// erfc(-x/sqrt 2) rather than 1 + erf(x/sqrt 2): for very negative x the latter subtracts two
// nearly equal numbers and loses every digit.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "elementwise.cuh"
#include "lab/lab.hpp"

namespace act {

struct GeluOp {
  static constexpr const char* name = "gelu";
  static constexpr const char* backward_name = "gelu_backward";
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

}  // namespace act

// What every activation topic shares: one flat array (elementwise.cuh).
using ActivationShapes = ew::FlatShapes;

// y = op(x)
template <class Op>
struct Activation : ActivationShapes {
  static constexpr const char* name = Op::name;
  static lab::Work work(const lab::Shape& s) {
    return {.bytes = 8.0 * double(s[0]), .flops = 0, .written = 4.0 * double(s[0])};  // x in, y out
  }

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<float> x, y;
    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), y(n) {
      rng.uniform(x, -6.f, 6.f);  // both tails: where erfc and exp must not lose digits
    }
    Problem(const lab::Shape& s, lab::Borrowed) : n(static_cast<std::size_t>(s[0])) {}
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = x.download();
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = Op::reference(hx[i]);
      return lab::compare(y.download(), ref, tolerance_or(lab::Tolerance::fp32()), "y");
    }
  };
};

// dx = dy * op'(x)
template <class Op>
struct ActivationBackward : ActivationShapes {
  static constexpr const char* name = Op::backward_name;
  static lab::Work work(const lab::Shape& s) {
    return {.bytes = 12.0 * double(s[0]), .flops = 0, .written = 4.0 * double(s[0])};  // x, dy in; dx out
  }

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<float> x, dy, dx;
    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), dy(n), dx(n) {
      rng.uniform(x, -6.f, 6.f);
      rng.uniform(dy, -1.f, 1.f);
    }
    Problem(const lab::Shape& s, lab::Borrowed) : n(static_cast<std::size_t>(s[0])) {}
    void poison(cudaStream_t s) override { lab::poison(dx, s); }
    lab::Verdict verify() override {
      const auto hx = x.download(), hg = dy.download();
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = double(hg[i]) * Op::derivative(hx[i]);
      return lab::compare(dx.download(), ref, lab::Tolerance::fp32(), "dx");
    }
  };
};

using Gelu = Activation<act::GeluOp>;
using GeluBackward = ActivationBackward<act::GeluOp>;
using Swish = Activation<act::SwishOp>;
using SwishBackward = ActivationBackward<act::SwishOp>;
