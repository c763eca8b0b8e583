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

// The previous step's products (Bf16BiasEpilogue) with linear_backward_bf16: Bf16Dact
// (epilogue_products.cuh), dX written in bf16 by the MLP's second product.
using FusedBf16Dact = FusedStep<Bf16Dact, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Dact, LAB_STEP,
                       "fused, mixed precision, the MLP's second product writing GELU's output gradient in bf16, "
                       "which GELU's backward reads (sm_90a)");
