// Fused, mixed precision, GELU's forward in the epilogue of the product that makes its input: the
// previous step (optimized_gpt2_step_fused_bf16_gelu_in_product.cu) with one change, in the MLP's
// forward. There cuBLASLt's bias epilogue wrote the MLP's first product's output h (B T x 4 d, the
// bias added, rounded once to bf16) and gelu_kernel read it back to write act = gelu(h), which the
// second product reads: 50 MB a block at small, context 1024, at about a copy's rate (19.3 us alone,
// Nsight Compute, ../../results/gpt2_bf16_h100_s83/). Here the previous step's product of the lab's
// own makes the first product too (gelu_product.cuh: bias_gelu, W read K-major as it lies), and its
// epilogue adds the bias, rounds h once, writes it for the backward and writes act = gelu(h) at the
// rounded value. h is not read back. In the forward alone, where nothing is kept for a backward,
// only act is written, over h's place, as gelu() wrote it in place before.
//
// Why it should be faster: act's pass is gone (h's 25 MB read again), and GELU's erf runs on the
// epilogue's warps while the next tile's products run. As in the previous step, the step gains only
// if that arithmetic hides under the products. Measured, it does not pay: on an H100 at small,
// context 1024, the full step took 7.88 ms against the previous step's 7.86 (session 86,
// ../../results/gpt2_bf16_h100_s86/): the fused product costs about what gelu_kernel's pass saved.
//
// The arithmetic is the previous step's roundings: h = the fp32 sum plus the bias, rounded once to
// bf16, as cuBLASLt's epilogue rounds it; act = gelu(h) as gelu_kernel computes it. Only the order of
// the product's sums differs. Where the product does not fit, the previous step's launches run.
//
// What it replaces, against the previous step:
//   | before                                                 | this step's                          |
//   | ------------------------------------------------------ | ------------------------------------ |
//   | linear_bias (cuBLASLt, bias epilogue): h in bf16       | bias_gelu: the same product, its     |
//   | gelu_kernel: reads h, writes act                       | epilogue writes h and act            |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_gelu_forward_in_product
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products with the MLP's first product's bias and GELU in its epilogue
// (Bf16GeluForwardInProduct, epilogue_products.cuh) and its attention (HopperQkvRows, hopper_attention.cuh).
using FusedBf16GeluForwardInProduct = FusedStep<Bf16GeluForwardInProduct, HopperQkvRows>;

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16GeluForwardInProduct, LAB_STEP,
                       "fused, mixed precision, the MLP's first product adding its bias and making GELU in its "
                       "epilogue, h not read back (sm_90a)");
