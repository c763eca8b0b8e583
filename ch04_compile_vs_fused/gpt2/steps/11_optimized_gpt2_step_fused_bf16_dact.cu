// Fused, mixed precision, GELU's output gradient in bf16: the previous step
// (optimized_gpt2_step_fused_bf16_epilogue.cu) with one change, in the MLP's backward. There the
// MLP's second product wrote its input gradient, dact = dY W (B T x 4d, the gradient of GELU's
// output), in fp32, and GELU's backward (gelu_backward_sum_kernel) read it back, 4 B an element, to
// multiply it by gelu'(h), write dh in bf16 and sum its columns into the first bias's gradient.
// Here the product writes dact in bf16 (cuBLAS: bf16 operands, fp32 accumulation, the sum rounded
// once on its way out), and GELU's backward reads 2 B an element: the same kernel, its input type a
// template parameter.
//
// Why it is faster: an element of the 4d columns moved 4 B out of the product and 4 B into the
// pass; now 2 and 2. 16 B less a token a column of the model a block: 0.6 GB a step at small,
// context 1024 (about 0.2 ms at 3 TB/s).
//
// The arithmetic gains one rounding, which the step declares: dact rounded to bf16 before gelu'
// multiplies it, as autocast's backward does (a linear layer's input gradient comes out of its
// product in bf16, and GELU's backward reads that). dh is still computed in fp32 and rounded once,
// and the bias gradient is summed from the fp32 values of dh. The precision
// "bf16-epilogue-bias-dact" has the check's model round dact too
// (gpt2::ModelOptions::mlp_grad_in_bf16).
//
// What it replaces, against the previous step:
//   | before                                                 | this step's                          |
//   | ------------------------------------------------------ | ------------------------------------ |
//   | MLP's second product: dact = dY W in fp32 (4 B)        | dact in bf16 (2 B)                   |
//   | gelu_backward_sum_kernel reads dact in fp32            | reads it in bf16                     |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_dact
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products (Bf16BiasEpilogue: epilogue_products.cuh) with linear_backward_bf16:
// dX^T (K x M) = W^T (K x N) dY^T (N x M) written in bf16, dW^T (K x N) = X^T (K x M) dY (M x N)
// in fp32, both accumulated in fp32 (policy::BackwardBf16Products). The step calls it for the MLP's
// second product alone.
struct Bf16Dact : Bf16BiasEpilogue {
  static constexpr const char* kPrecision = "bf16-epilogue-bias-dact";
  Bf16Dact(const gpt2::Config& c, gpt2::Phase phase) : Bf16BiasEpilogue(c, phase) {}
  void linear_backward_bf16(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* X,
                            const __nv_bfloat16* W, __nv_bfloat16* dX, float* dW, int M, int N, int K, cudaStream_t) {
    const float one = 1.f, zero = 0.f;
    LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, &one, W, CUDA_R_16BF, K, dY, CUDA_R_16BF, N, &zero,
                           dX, CUDA_R_16BF, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, &one, X, CUDA_R_16BF, K, dY, CUDA_R_16BF, N, &zero,
                           dW, CUDA_R_32F, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
};

static_assert(policy::Products<Bf16Dact> && policy::BackwardBf16Products<Bf16Dact>);

using FusedBf16Dact = FusedStep<Bf16Dact, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Dact, LAB_STEP,
                       "fused, mixed precision, the MLP's second product writing GELU's output gradient in bf16, "
                       "which GELU's backward reads (sm_90a)");
