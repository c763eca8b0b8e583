// Fused, mixed precision (bf16 products, as torch.autocast(bfloat16) computes them): the fused step
// (gpt2_fused.cuh: every kernel and the schedule, unchanged) with each matrix product's operands
// rounded to bf16 and multiplied on the tensor cores with fp32 accumulation, the attention on the
// chapter's bf16 flash kernels (flash_bf16.cuh), and everything else (LayerNorm, GELU, the
// residual stream, the loss and its softmax, AdamW and the parameters it updates) in fp32.
//
// Why it is faster: after fusion, the fp32 step's time is its SGEMMs (about 72% at small, context
// 1024) on the SIMT units' 67 TFLOP/s, and its attention. bf16 keeps 8 significant bits, so a
// product of two bf16 values is exact in fp32, and the H100's tensor cores multiply bf16 at about
// 990 TFLOP/s dense: the same products at a small fraction of the time. The price is accuracy:
// each operand is off by up to 2^-8 of itself (fp32: 2^-24), which the topic's check models (the
// variant declares "bf16+bf16-attention", gpt2::ModelOptions) rather than the fp32 tolerance.
//
// What this first mixed-precision step still pays: like autocast, it rounds each product's
// operands to bf16 as the product needs them (a memory-bound pass per operand: 4 bytes read, 2
// written a value, weights included, every step), and the attention's Q, K, V and dO the same way.
// The steps after it write the activations in bf16 where they are made (LayerNorm, GELU, the
// heads' layout) and the weights' bf16 copies in AdamW's pass.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16
#include <cuda_bf16.h>

#include "flash_bf16.cuh"
#include "gpt2_fused.cuh"

namespace {

using Bf16Buffer = lab::DeviceBuffer<__nv_bfloat16>;

// y = x rounded to bf16 (to nearest, ties to even).
__global__ void to_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y, std::size_t n) {
  for (std::size_t i : lab::grid_stride(n)) y[i] = __float2bfloat16(x[i]);
}
void to_bf16(const float* x, Bf16Buffer& y, std::size_t n, cudaStream_t stream) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y.data(), n);
  LAB_CHECK(cudaGetLastError());
}

// Every linear layer's products, the head's included (autocast runs nn.Linear in bf16): the
// operands rounded into scratch, one cuBLAS GEMM with bf16 inputs, fp32 output and fp32
// accumulation (CUBLAS_COMPUTE_32F). `a` holds the activations' side (X forward, dY backward, the
// head's N x V gradient the widest), `b` the weights (and X for dW).
struct Bf16Gemm {
  static constexpr const char* kPrecision = "bf16";
  Bf16Buffer a, b;
  static std::size_t a_size(const gpt2::Config& c) { return c.tokens() * std::max<std::size_t>(4 * c.d, c.vocab); }
  static std::size_t b_size(const gpt2::Config& c, gpt2::Phase phase) {
    const std::size_t weights = std::size_t(std::max(4 * c.d, c.vocab)) * c.d;
    return std::max(weights, phase == gpt2::Phase::forward ? 0 : c.tokens() * 4 * c.d);
  }
  Bf16Gemm(const gpt2::Config& c, gpt2::Phase phase) : a(a_size(c)), b(b_size(c, phase)) {}

  // C (m x n, column-major, fp32) = op(A) op(B), A and B bf16.
  static void gemm(cublasHandle_t blas, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                   const Bf16Buffer& A, int lda, const Bf16Buffer& B, int ldb, float* C, int ldc) {
    const float one = 1, zero = 0;
    LAB_CHECK(cublasGemmEx(blas, ta, tb, m, n, k, &one, A.data(), CUDA_R_16BF, lda, B.data(), CUDA_R_16BF, ldb, &zero,
                           C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  // Y (M x N) = X W^T: cuBLAS sees Y^T (N x M) = W (K x N, transposed) X^T (K x M).
  void linear(cublasHandle_t blas, const float* X, const float* W, float* Y, int M, int N, int K,
              cudaStream_t stream) {
    to_bf16(X, a, std::size_t(M) * K, stream);
    to_bf16(W, b, std::size_t(N) * K, stream);
    gemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, b, K, a, K, Y, N);
  }
  // dX^T (K x M) = W^T (K x N) dY^T (N x M); then dW^T (K x N) = X^T (K x M) dY (M x N), X rounded
  // into W's scratch once dX is done; db from the fp32 dY.
  void linear_backward(cublasHandle_t blas, const float* dY, const float* X, const float* W, float* dX, float* dW,
                       float* db, int M, int N, int K, cudaStream_t stream) {
    to_bf16(dY, a, std::size_t(M) * N, stream);
    to_bf16(W, b, std::size_t(N) * K, stream);
    gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, b, K, a, N, dX, K);
    to_bf16(X, b, std::size_t(M) * K, stream);
    gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, b, K, a, N, dW, K);
    if (db) ops::bias_backward(dY, db, M, N, stream);
  }
  void head(cublasHandle_t blas, const float* X, const float* W, float* Y, int M, int N, int K, cudaStream_t s) {
    linear(blas, X, W, Y, M, N, K, s);
  }
  void head_backward(cublasHandle_t blas, const float* dY, const float* X, const float* W, float* dX, float* dW,
                     float* db, int M, int N, int K, cudaStream_t stream) {
    linear_backward(blas, dY, X, W, dX, dW, db, M, N, K, stream);
  }
};

// The chapter's bf16 flash attention (optimized_attention_fused_tc and
// optimized_attention_backward_fused_tc), over the step's fp32 heads rounded into scratch. The
// backward's delta (rowsum dO o O) comes from the fp32 dO and O, as the step computes it.
struct FlashBf16 {
  static constexpr const char* kPrecision = "bf16";
  Bf16Buffer q, k, v, dout;
  FlashBf16(const gpt2::Config& c, gpt2::Phase phase)
      : q(Saved::heads_size(c)), k(Saved::heads_size(c)), v(Saved::heads_size(c)),
        dout(phase == gpt2::Phase::forward ? 0 : Saved::heads_size(c)) {}
  void forward(const float* q32, const float* k32, const float* v32, float* o, float* lse, int bh, int seq, int d,
               bool causal, float scale, cudaStream_t stream) {
    const std::size_t n = std::size_t(bh) * seq * d;
    to_bf16(q32, q, n, stream), to_bf16(k32, k, n, stream), to_bf16(v32, v, n, stream);
    flashbf16::forward(q.data(), k.data(), v.data(), o, lse, bh, seq, d, causal, scale, stream);
  }
  void backward(const float* q32, const float* k32, const float* v32, const float* dout32, const float* lse,
                const float* delta, float* dq, float* dk, float* dv, int bh, int seq, int d, bool causal, float scale,
                cudaStream_t stream) {
    const std::size_t n = std::size_t(bh) * seq * d;
    to_bf16(q32, q, n, stream), to_bf16(k32, k, n, stream), to_bf16(v32, v, n, stream);
    to_bf16(dout32, dout, n, stream);
    flashbf16::backward(q.data(), k.data(), v.data(), dout.data(), lse, delta, dq, dk, dv, bh, seq, d, causal, scale,
                        stream);
  }
};

using FusedBf16 = FusedStep<Bf16Gemm, FlashBf16>;

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16, 5,
                       "fused, mixed precision: every product's operands rounded to bf16 (autocast's way), tensor "
                       "cores with fp32 accumulation, bf16 flash attention; the rest and AdamW in fp32");
