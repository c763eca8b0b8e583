// Fused, mixed precision (bf16 products, as torch.autocast(bfloat16) computes them): the fused step
// (gpt2/fused/: every kernel and the schedule) with each matrix product's operands in bf16,
// multiplied on the tensor cores with fp32 accumulation, the attention on the chapter's bf16 flash
// kernels (flash_bf16.cuh), and everything else (LayerNorm, GELU, the residual stream, the loss and
// its softmax, AdamW and the fp32 master parameters it updates) in fp32.
//
// Why it is faster: after fusion, the fp32 step's time is its SGEMMs (about 72% at small, context
// 1024) on the SIMT units' 67 TFLOP/s, and its attention. bf16 keeps 8 significant bits, so a
// product of two bf16 values is exact in fp32, and the H100's tensor cores multiply bf16 at about
// 990 TFLOP/s dense: the same products at a small fraction of the time. The price is accuracy:
// each operand is off by up to 2^-8 of itself (fp32: 2^-24), which the topic's check models (the
// variant declares "bf16+bf16-attention", gpt2::ModelOptions) rather than the fp32 tolerance.
// Against the vanilla mixed-precision step (optimized_gpt2_step_vanilla_bf16.cu: the same
// arithmetic, one kernel an operation) the lesson is the fp32 one again, and larger: once the
// products are fast, the memory-bound passes between them are most of the step.
//
// Where the bf16 values come from (autocast rounds each product's operands as it needs them, a
// memory-bound pass per operand): this file's Operand is bf16, so the kernels that make the
// activations write them in bf16 in the pass they already make (the LayerNorms' outputs, GELU's
// and its input, the MLP's pre-activation; the merged attention output; Q, K, V and dO as the step
// lays them out by head), and the step saves them so: half the bytes of fp32 to write, keep and
// read back. A block's weights are rounded once a step, at the start of its forward, into memory
// kept with its saved tensors (at scale, inside the gradients' buffer, which the backward has not
// written yet), and read from there by its forward and its backward: one pass over the parameters
// a step, as autocast's weight cache makes, but no memory of its own (autocast's copies are saved
// tensors, 2 bytes a parameter through the step; and its products write the weights' gradients in
// bf16, which a second pass casts back to fp32: these products write them in fp32). (A copy that
// AdamW writes in its pass, as llm.c keeps one, would save the rounding pass but would have to
// outlive the step: 2 bytes a parameter held for good, 2.8 GB at xl, which puts the step's peak
// above PyTorch's there.) Only the gradients flowing into a product (dY) are still rounded by a
// pass of their own: they are made in fp32 by sums (LayerNorm's backward into the residual
// gradient, the loss's) that the step keeps in fp32.
//
// What it replaces, against the fused step (optimized_gpt2_step_fused.cu, whose table says what each
// of its kernels replaces of the vanilla step's) and the vanilla bf16 step's casts:
//   | before                                              | this step's                               |
//   | --------------------------------------------------- | ----------------------------------------- |
//   | SGEMM                                               | bf16 cuBLAS GEMMs, fp32 accumulation      |
//   | the SIMT flash forward and backward                 | the bf16 flash kernels (mma.sync)         |
//   | a cast pass for each activation (vanilla bf16)      | the kernel that makes it writes bf16      |
//   | a cast pass for each weight, each use (vanilla bf16) | round_kernel, once a block a step        |
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16
#include <cuda_bf16.h>

#include "gpt2/fused/step.cuh"

namespace {

using Bf16Buffer = lab::DeviceBuffer<__nv_bfloat16>;

// Every linear layer's products, the head's included (autocast runs nn.Linear in bf16): X and W
// arrive in bf16 (the step's kernels wrote X so; W is the block's copy the step rounded), dY is
// rounded into scratch; one cuBLAS GEMM with bf16 inputs, fp32 output and fp32 accumulation
// (CUBLAS_COMPUTE_32F) a product: the eager library's bf16 linear (gpt2_eager.cuh).
struct Bf16Gemm {
  static constexpr const char* kPrecision = "bf16";
  using Operand = __nv_bfloat16;
  Bf16Buffer dy;  // a product's output gradient, rounded: up to the head's B T x V
  Bf16Gemm(const gpt2::Config& c, gpt2::Phase phase)
      : dy(phase == gpt2::Phase::forward ? 0 : c.tokens() * std::max<std::size_t>(4 * c.d, c.vocab)) {}

  void linear(cublasHandle_t blas, const __nv_bfloat16* X, const __nv_bfloat16* W, float* Y, int M, int N, int K,
              cudaStream_t) {
    ops::linear(blas, X, W, Y, M, N, K);
  }
  // dY rounded, then dX = dY W and dW = dY^T X; db from the fp32 dY.
  void linear_backward(cublasHandle_t blas, const float* dY, const __nv_bfloat16* X, const __nv_bfloat16* W,
                       float* dX, float* dW, float* db, int M, int N, int K, cudaStream_t stream) {
    ops::to_bf16(dY, dy.data(), std::size_t(M) * N, stream);
    ops::linear_backward(blas, dy.data(), X, W, dX, dW, M, N, K);
    if (db) ops::bias_backward(dY, db, M, N, stream);
  }
};

using FusedBf16 = FusedStep<Bf16Gemm, FlashBf16>;  // FlashBf16: policies.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16, LAB_STEP,
                       "fused, mixed precision: activations written in bf16 where they are made, each block's weights "
                       "rounded once a step, tensor cores with fp32 accumulation, bf16 flash attention; LayerNorm, "
                       "the loss, AdamW and its master weights in fp32");
