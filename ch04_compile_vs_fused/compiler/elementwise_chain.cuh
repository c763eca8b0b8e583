// The element-wise chain: y = gelu(a x + b) * sigmoid(x) + c over a rows x cols tensor x, with
// scalars a = 1.5, b = 0.5 and a bias c of one value per column (broadcast down the rows), and
// gelu(z) = 0.5 z (1 + erf(z / sqrt 2)). Six operations an element, each trivial: the whole cost is
// memory, and the minimum is one read of x, one write of y (and c once). The three variants are
// the chapter's question in small: `vanilla` runs one kernel per operation as eager mode does,
// `compiled` lets lab::jit generate one kernel from the expression, `fused` is written by hand.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lab/jit.hpp"
#include "lab/lab.hpp"

struct ElementwiseChain {
  static constexpr const char* name = "elementwise_chain";
  static constexpr int chapter = 4;
  static constexpr float kA = 1.5f, kB = 0.5f, kRsqrt2 = 0.70710678118654752f;
  static std::vector<std::string> dims() { return {"rows", "cols"}; }
  static std::vector<lab::Shape> sweep() { return {{4096, 4096}, {16384, 16384}}; }
  // Awkward: one element, cols not a multiple of 4 (the bias is then not 16-byte aligned per row).
  static std::vector<lab::Shape> checks() { return {{1, 1}, {3, 5}, {7, 33}, {5, 4}, {64, 768}, {1000, 1001}}; }
  static lab::Work work(const lab::Shape& s) {
    const double n = double(s[0]) * double(s[1]);
    return {.bytes = 4.0 * (2 * n + double(s[1])), .flops = 0};
  }
  static std::string validate(const lab::Shape& s) {
    if (s[1] > (std::int64_t{1} << 31) - 1) return "cols below 2^31";
    return double(s[0]) * double(s[1]) > double(std::int64_t{1} << 32) ? "at most 2^32 elements" : "";
  }

  // The chain as a lab::jit expression (the compiled variant and demo_jit build it).
  static lab::jit::Expr expression() {
    using lab::jit::Expr;
    const Expr x = Expr::input(0), c = Expr::column(0);
    const Expr z = x * kA + kB;
    return 0.5f * z * (1.0f + erf(z * kRsqrt2)) * sigmoid(x) + c;
  }

  static double reference(double x, double c) {
    const double z = double(kA) * x + double(kB);
    return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))) / (1.0 + std::exp(-x)) + c;
  }

  // What the fused variants declare: x read once, y written once, c once (the minimum itself, shown
  // beside the vanilla variant's thirteen accesses an element).
  static lab::Declared moves_the_minimum() {
    return {.moved_bytes = [](const lab::Shape& s) { return 4.0 * (2.0 * double(s[0]) * double(s[1]) + double(s[1])); }};
  }

  struct Problem : lab::Problem {
    int rows, cols;
    std::size_t n;
    lab::DeviceBuffer<float> x, c, y;
    Problem(const lab::Shape& s, lab::Rng& rng)
        : rows(static_cast<int>(s[0])), cols(static_cast<int>(s[1])), n(std::size_t(rows) * cols), x(n), c(cols),
          y(n) {
      rng.uniform(x, -3.f, 3.f);
      rng.uniform(c, -1.f, 1.f);
    }
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = x.download(), hc = c.download();
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = reference(hx[i], hc[i % std::size_t(cols)]);
      return lab::compare(y.download(), ref, lab::Tolerance::fp32(), "y", {rows, cols});
    }
  };
};
