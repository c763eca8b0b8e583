// The problem behind the batched-GEMM lesson: many small independent matrix products
// C[i] = A[i] B[i] (row-major, fp32). One small GEMM is far too little work to fill an H100: a
// 32x32x32 product is 65 thousand FLOPs for a GPU that does 60 trillion a second. Issued one call
// at a time, the batch costs one launch each; issued as one batched call, cuBLAS spreads the whole
// batch over the GPU in a single launch.
#pragma once

#include <string>
#include <vector>

#include "lab/lab.hpp"

struct BatchedGemm {
  static constexpr const char* name = "batched_gemm";
  static constexpr int chapter = 1;
  static std::vector<std::string> dims() { return {"batch", "m", "n", "k"}; }
  static std::vector<lab::Shape> sweep() { return {{1000, 32, 32, 32}, {40, 32, 256, 256}, {4096, 64, 64, 64}}; }
  static std::vector<lab::Shape> checks() { return {{1, 1, 1, 1}, {3, 5, 7, 9}, {10, 33, 17, 65}, {2, 128, 1, 1}, {5, 1, 100, 3}}; }
  static lab::Work work(const lab::Shape& s) {
    const double b = s[0], m = s[1], n = s[2], k = s[3];
    return {.bytes = 4.0 * b * (m * k + k * n + m * n), .flops = 2.0 * b * m * n * k};
  }
  static std::string validate(const lab::Shape& s) {
    for (std::size_t i = 0; i < 4; ++i)
      if (s[i] > (1 << 20)) return "each extent at most 1048576";
    return "";
  }

  // Every element of C is an fp32 inner product of length k, summed in an order each variant (and
  // cuBLAS) chooses: fp32's tolerance plus its conditioning, sum_error(k + 1) sum_t |a b|.
  static lab::Tolerance tolerance() { return lab::Tolerance::fp32(); }

  struct Problem : lab::Problem {
    int batch, m, n, k;
    lab::DeviceBuffer<float> a, b, c;

    Problem(const lab::Shape& s, lab::Rng& rng)
        : batch(static_cast<int>(s[0])), m(static_cast<int>(s[1])), n(static_cast<int>(s[2])), k(static_cast<int>(s[3])),
          a(std::size_t(batch) * m * k), b(std::size_t(batch) * k * n), c(std::size_t(batch) * m * n) {
      rng.uniform(a);
      rng.uniform(b);
    }
    const float* a_ptr(int i) const { return a.data() + std::size_t(i) * m * k; }
    const float* b_ptr(int i) const { return b.data() + std::size_t(i) * k * n; }
    float* c_ptr(int i) { return c.data() + std::size_t(i) * m * n; }

    void poison(cudaStream_t s) override { lab::poison(c, s); }
    lab::Verdict verify() override {
      const auto ha = a.download(), hb = b.download(), hc = c.download();
      std::vector<double> ref(hc.size()), slack(hc.size());
      const double e = lab::fp32::sum_error(k + 1.0);
      for (int i = 0; i < batch; ++i)
        for (int r = 0; r < m; ++r)
          for (int col = 0; col < n; ++col) {
            lab::Sum acc;
            for (int t = 0; t < k; ++t)
              acc.add(double(ha[(std::size_t(i) * m + r) * k + t]) * double(hb[(std::size_t(i) * k + t) * n + col]));
            ref[(std::size_t(i) * m + r) * n + col] = acc.value;
            slack[(std::size_t(i) * m + r) * n + col] = e * acc.magnitude;
          }
      return lab::compare(hc, ref, tolerance(), "C", {batch, m, n}, slack);
    }
  };
};

// cuBLAS is column-major: a row-major C = A B is the column-major C^T = B^T A^T, so every variant
// passes B before A and n before m.

// Every variant's cuBLAS handle, in true fp32 arithmetic (no TF32, whatever the environment says).
struct Fp32Blas {
  lab::CublasHandle handle;
  Fp32Blas() { LAB_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH)); }
};
