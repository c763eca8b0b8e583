// Fused, mixed precision, the LayerNorms' outputs kept: the previous step
// (optimized_gpt2_step_fused_bf16_gelu_in_flight.cu) with one change, in what the forward keeps for
// the backward. Every step so far kept a LayerNorm's input (the residual stream, fp32) with its mean
// and rstd, and the backward made the output again before the product that reads it
// (layer_norm_again_kernel: 2 launches a block and one for the final LayerNorm, each reading the
// fp32 input, 4 bytes a value, and writing the bf16 output, 2). That was the cheaper trade in fp32,
// where the output is as large as the input: the pass reads what reading the output back would
// read. In bf16 the output is half the input, so keeping it (2 bytes a value, written by the
// forward's LayerNorm pass as it already is) costs the backward nothing but the product's read,
// where making it again costs 6 bytes a value and a launch.
// Here the forward's LayerNorm passes write their bf16 outputs into the block's saved tensors (ln1
// and ln2: Saved, saved.cuh; the final one's with the head's), and the backward's products read
// them there; the one scratch buffer for a LayerNorm's output goes.
//
// Why it is faster: the backward loses 2 L + 1 passes over the residual stream (25 at GPT-2 small:
// 0.162 ms of step 14's 8.31 under --profile on the H200). The price is memory: 2 B T d bytes a
// block more kept (at small, context 1024: 12.6 MB a block, 157 MB in all, less the 6.3 MB buffer
// that goes), which the saved tensors' plan (gpt2::plan_saved) places in the gradients' buffer where
// it has room and spills where it has not. On an H200 (2026-11-29, one call, L2 flushed, median of
// 10): the full step 7.97 against 8.12 ms at small, context 1024; 12.62 against 12.90 at medium,
// context 512; 35.04 against 35.38 at xl, context 256; its peak 2741 against 2633 MiB, 5891 against
// 5743, 23254 against 23251 (at xl the plan finds room for nearly all of it in the gradients'
// buffer). The forward alone is unchanged (2.61 ms at small). Against PyTorch: ../README.md,
// "Step 15".
//
// The values are the previous step's bit for bit: the same kernel's output, written once and read
// back, where the backward's pass recomputed it from the same fp32 values with the same expression.
// The precision is the previous step's.
//
// What it replaces, against the previous step:
//   | before                                            | this step's                               |
//   | ------------------------------------------------- | ----------------------------------------- |
//   | layer_norm_again_kernel before the backward's     | the forward's outputs, kept: Saved::ln1,  |
//   | first MLP product, QKV product and head product   | ln2, HeadSaved::ln (policy kKeepLayerNorm)|
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_keep_ln
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products with the LayerNorms' outputs kept for the backward: Bf16KeepLn
// (epilogue_products.cuh, policy::NamesKeepLayerNorm), which the step after this builds on.
using FusedBf16KeepLn = FusedStep<Bf16KeepLn, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16KeepLn, LAB_STEP,
                       "fused, mixed precision, the LayerNorms' bf16 outputs kept for the backward, not made "
                       "again (sm_90a)");
