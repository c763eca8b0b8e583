// Fused, mixed precision, GELU made once in the backward: the previous step
// (optimized_gpt2_step_fused_bf16_logits.cu) with one change, in the MLP's backward. The forward
// does not keep GELU's output (4d values a token a block: at small, context 1024, 302 MB over the
// 12 blocks), so the backward makes it again from the saved pre-activation h. There a pass of its
// own did that (gelu_kernel: read h, erff, write act) before the MLP's second product's backward,
// whose weight gradient dW = dY^T act reads it; then GELU's backward (gelu_backward_sum_kernel)
// read h again and took erff again, for gelu'(h) = Phi(h) + h phi(h), where Phi = (1 + erf) / 2 is
// the same erf that gelu(h) = h Phi(h) took.
// Here the second product's backward runs as its two products: dX = dY W first (GELU's output
// gradient, in bf16), then GELU's backward, which now also writes act = gelu(h) from the erf it
// takes for gelu'(h) (gelu_backward_act_kernel), and writes dh over dX; then dW = dY^T act.
//
// Why it is faster: GELU is bound by its arithmetic, not its bytes (tensor_cores.md: gelu_kernel
// keeps the SM issuing 75% of its cycles, erff and expf about 30 instructions an element). A pass
// that read h (2 B) and wrote act (2 B) with an erff an element goes; GELU's backward writes 2 B
// more an element and takes no second erff. Nsight Compute, one launch alone at small, context
// 1024: 19.8 + 35.9 us became 41.5. In the step's graph, where the pass runs beside AdamW, less:
// the H100 measured 9.15 against 9.26 ms a step at small, 14.6 against 14.8 at medium, 39.6
// against 39.9 at xl (tensor_cores.md, step 13).
//
// The arithmetic is unchanged, value for value: act is gelu(h) as gelu_kernel computed it (the
// same operations on the same erf: gelu_of and dgelu_of in kernels.cuh), dh and the bias gradient
// as gelu_backward_sum_kernel computed them. The precision is the previous step's.
//
// What it replaces, against the previous step:
//   | before                                                    | this step's                       |
//   | --------------------------------------------------------- | --------------------------------- |
//   | backward: gelu_kernel, act = gelu(h), read h, write act   | (gone; the forward's stays)       |
//   | MLP's second product: dX and dW together                  | dX; then dW after GELU's backward |
//   | gelu_backward_sum_kernel: dh into gy, erff again          | gelu_backward_act_kernel: act and |
//   |                                                           | dh (over dX) from one erff        |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_gelu_once
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// Its products: Bf16GeluOnce (epilogue_products.cuh), the previous step's with the MLP's second
// product's backward one product at a time.

using FusedBf16GeluOnce = FusedStep<Bf16GeluOnce, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16GeluOnce, LAB_STEP,
                       "fused, mixed precision, GELU's output made in the backward by GELU's backward, from the "
                       "erf it takes for GELU's slope (sm_90a)");
