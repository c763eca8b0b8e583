// The bf16 GPT-2 steps' own matrix products (gpt2/fused/epilogue_products.cuh), each on its own, on
// exact bf16 inputs against a double reference of its contract, bounded by its own arithmetic.
//
// Why here as well as in the steps' checks: a 1% error in the head's product (the logits) moves a
// step's outputs at the check's initial weights by less than bf16's own rounding does, and the
// step's check passes it (tools/planted_bugs.sh could not plant it there; the gpt2 tensor_cores.md,
// step 12). Here the product's output is compared itself:
//  - a product of two bf16 values is exact in fp32 (8 + 8 significant bits), so the only errors
//    are the accumulation's and the output's rounding;
//  - the tensor cores' fp32 accumulation is not correctly rounded (its additions truncate: within an
//    ulp, 2u each, and biased, so the deterministic gamma_n = n 2u / (1 - n 2u) of sum |x w|, not a
//    probabilistic bound);
//  - the output rounded to bf16: u_b = 2^-8 of the value, plus (1 + u_b) times the fp32 error: at
//    K = 768 and random signs, a 1% error in a typical element is about twice its bound.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpt2/fused/epilogue_products.cuh"
#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "lab/verify.hpp"
#include "tests/kernels/kernel_testing.cuh"

namespace {

// Values uniform in [lo, hi], rounded to bf16: the inputs the device reads, exactly as the host holds them.
std::vector<float> bf16_values(lab::Rng& rng, std::size_t n, float lo, float hi) {
  std::vector<float> x = uniform(rng, n, lo, hi);
  for (float& v : x) v = round_bf16(v);
  return x;
}
// A sum of n terms through the tensor cores' truncating fp32 additions: at most gamma_n (2u a
// rounding) of the terms' magnitudes.
double truncated_sum_error(double n) { return n * 2 * kU / (1 - n * 2 * kU); }

// Y = X W^T (+ b): the double reference and each element's bound (the output rounded to bf16 from
// the fp32 value, the bias one more term of the sum).
struct Expected {
  std::vector<double> ref, slack;
};
Expected expected(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b, int M, int N,
                  int K) {
  Expected e{std::vector<double>(std::size_t(M) * N), std::vector<double>(std::size_t(M) * N)};
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = b ? (*b)[j] : 0.0, mag = b ? std::fabs((*b)[j]) : 0.0;
      for (int k = 0; k < K; ++k) {
        const double t = double(x[std::size_t(i) * K + k]) * w[std::size_t(j) * K + k];
        s += t, mag += std::fabs(t);
      }
      const std::size_t at = std::size_t(i) * N + j;
      e.ref[at] = s;
      e.slack[at] = (1 + kUb) * truncated_sum_error(K + (b ? 1 : 0)) * mag;
    }
  return e;
}

// linear_bf16_out: the head's product of step 12 (the logits in bf16), at the head's shapes' kinds:
// a vocabulary not a multiple of anything (1001), the lab's 10000, K of GPT-2 small and of a tiny model.
TEST(Products, LinearBf16Out) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  const struct {
    int M, N, K;
  } cases[] = {{37, 1001, 768}, {64, 10000, 64}, {9, 97, 13}};
  lab::CublasHandle blas;
  for (const auto& [M, N, K] : cases) {
    SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K));
    const auto x = bf16_values(rng, std::size_t(M) * K, -1.f, 1.f), w = bf16_values(rng, std::size_t(N) * K, -1.f, 1.f);
    auto x_d = device(to_bf16(x)), w_d = device(to_bf16(w));
    lab::DeviceBuffer<bf16> y_d(std::size_t(M) * N);
    lab::poison(y_d);
    linear_bf16_out(blas, x_d.data(), w_d.data(), y_d.data(), M, N, K);
    LAB_CHECK(cudaDeviceSynchronize());
    const Expected e = expected(x, w, nullptr, M, N, K);
    EXPECT_PASSES(judge(to_float(y_d.download()), e.ref, e.slack, kUb, "Y (bf16)"));
  }
}

// LtBias::run: the QKV product's and the MLP's first of steps 10 to 12, the bias (bf16) added by
// cuBLASLt's epilogue in fp32 before the one rounding to bf16. N as the step has them (3d, 4d), M
// odd as well.
TEST(Products, LtBiasEpilogue) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  const struct {
    int M, N, K;
  } cases[] = {{37, 2304, 768}, {64, 256, 64}, {128, 3 * 80, 80}};
  LtBias lt;
  lab::DeviceBuffer<std::uint8_t> workspace(std::size_t(32) << 20);
  lt.use_workspace(workspace.data(), workspace.size());
  for (const auto& [M, N, K] : cases) {
    SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K));
    const auto x = bf16_values(rng, std::size_t(M) * K, -1.f, 1.f), w = bf16_values(rng, std::size_t(N) * K, -1.f, 1.f);
    const auto b = bf16_values(rng, std::size_t(N), -4.f, 4.f);
    auto x_d = device(to_bf16(x)), w_d = device(to_bf16(w)), b_d = device(to_bf16(b));
    lab::DeviceBuffer<bf16> y_d(std::size_t(M) * N);
    lab::poison(y_d);
    lt.run(x_d.data(), w_d.data(), b_d.data(), y_d.data(), M, N, K, nullptr);
    LAB_CHECK(cudaDeviceSynchronize());
    const Expected e = expected(x, w, &b, M, N, K);
    EXPECT_PASSES(judge(to_float(y_d.download()), e.ref, e.slack, kUb, "Y + b (bf16)"));
  }
}

}  // namespace
