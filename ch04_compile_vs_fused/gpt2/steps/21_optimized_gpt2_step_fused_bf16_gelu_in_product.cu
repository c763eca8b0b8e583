// Fused, mixed precision, GELU's backward in the epilogue of the product that makes its input: the
// previous step (optimized_gpt2_step_fused_bf16_ln_grads.cu) with one change, in the MLP's backward.
// There the MLP's second product wrote its input gradient dact = dY W (B T x 4 d) in bf16 through
// cuBLAS, and gelu_backward_act_in_flight read it back with the pre-activation h to write dh over
// it, GELU's output act for the weight gradient, and the first bias's gradient: 100 MB a block at
// small, context 1024, a kernel that runs at the rate of a copy (../README.md, session 83: 35.7 us
// alone, 47 against a memcpy's 42 us for its bytes with L2 flushed). Here the product is the lab's
// own (gelu_product.cuh: dx_dgelu, wgmma and the TMA on Hopper), and its epilogue does that
// kernel's arithmetic before the tile leaves the SM: dact rounded to bf16, dh = dact gelu'(h) and
// act = gelu(h) written in bf16, the column sums of dh added into the bias's gradient.
//
// Why it should be faster: dact is never written or read back (50 MB a block at small), and the
// epilogue's erf, exp and memory run on warps of their own while the next tile's products run. The
// product itself keeps cuBLAS's pace without an epilogue (session 84); the step gains only if the
// epilogue's arithmetic hides under it, which earlier designs with four warps for it did not
// (../../results/gpt2_bf16_h100_s84/). With 11 warps of its own it does: on an H100 at small,
// context 1024, the full step took 7.86 ms against the previous step's 8.02, 1.021x (session 86,
// ../../results/gpt2_bf16_h100_s86/). Not at every shape: at medium, context 512, and xl, context
// 256, it was slower than the previous step, 13.23 against 13.14 ms and 38.43 against 37.30
// (session 87, ../../results/gpt2_bf16_h100_s87/; the gpt2 README says what that points to).
//
// The arithmetic is the previous step's roundings, value for value: dact rounded once to bf16 from
// its fp32 sum, GELU's backward on it in fp32 as gelu_backward_act_in_flight computes it. Only the
// order of the product's sums (the lab's wgmma against cuBLAS's kernel) and of the bias's column
// sums differs, which the check's bound for a sum allows in any order. Where the product does not
// fit (d not a multiple of 8, a tensor not 16-byte aligned, a build without sm_90a) the previous
// step's two launches run.
//
// What it replaces, against the previous step:
//   | before                                                    | this step's                        |
//   | --------------------------------------------------------- | ---------------------------------- |
//   | linear_dx_bf16 (cuBLAS): dact in bf16, 25 MB at small     | dx_dgelu: the same product, ...    |
//   | gelu_backward_act_in_flight: reads dact and h, writes dh, | ... its epilogue reads h, writes   |
//   | act; db's column sums                                     | dh, act and db's sums              |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_gelu_in_product
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products with GELU's backward in the MLP's second product's epilogue
// (Bf16GeluInProduct, epilogue_products.cuh) and its attention (HopperQkvRows, hopper_attention.cuh).
using FusedBf16GeluInProduct = FusedStep<Bf16GeluInProduct, HopperQkvRows>;

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16GeluInProduct, LAB_STEP,
                       "fused, mixed precision, GELU's backward in the epilogue of the product that makes its input "
                       "gradient, dact never written (sm_90a)");
