// Fused, with the attention on the tensor cores: the fused step (optimized_gpt2_step_fused.cu) with
// one change, its flash attention forward and backward in 3xTF32 (flash_3xtf32.cuh, the chapter's
// optimized_attention_fused_3xtf32 and optimized_attention_backward_fused_3xtf32). The products stay
// on cuBLAS SGEMM. Why: once the element-wise work is fused, the step's time is the SGEMMs (about
// 72% at small, context 1024, near the FP32 peak) and the attention (about 19%, at about a third of
// the peak: the SIMT flash kernels). Attention's products are short sums (64 terms of a head, or a
// 64-key tile) that 3xTF32 computes at fp32's accuracy several times faster than the SIMT units.
// Unlike the 3xTF32 step that puts the linear layers' long sums on the tensor cores (and fails
// PyTorch's fp32 check: the tensor cores' truncating accumulation over thousands of terms), no sum
// here stays in the tensor cores for more than a tile: the checks hold at fp32 tolerance, with the
// attention's products modelled at 3xTF32's rounding (gpt2::ModelOptions, "+3xtf32-attention").
//
// What it replaces, against the fused step (optimized_gpt2_step_fused.cu, whose table says what each
// of its kernels replaces of the vanilla step's; every other kernel is that step's):
//   | the fused step's                        | this step's                                 |
//   | --------------------------------------- | ------------------------------------------- |
//   | the flash forward and backward, SIMT    | the 3xTF32 flash forward and backward (mma.sync) |
// lab-after: optimized_gpt2_step_fused
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_tc_attention
#include "attention/kernels/flash_3xtf32.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The chapter's 3xTF32 flash attention, forward and backward.
struct Flash3xTf32 {
  static constexpr const char* kPrecision = "3xtf32";
  Flash3xTf32(const gpt2::Config&, gpt2::Phase) {}
  static constexpr auto forward = flash3x::forward;
  static constexpr auto backward = flash3x::backward;
};
using FusedTcAttention = FusedStep<Sgemm, Flash3xTf32>;

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedTcAttention, LAB_STEP,
                       "fused, the attention on the tensor cores: 3xTF32 flash forward and backward, each tile's sums "
                       "added in fp32; the products on fp32 cuBLAS");
