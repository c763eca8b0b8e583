// Fused, mixed precision, the attention on Hopper's own instructions: the previous step
// (optimized_gpt2_step_fused_bf16_grads.cu) with one change, its Attention policy. There the
// attention ran the chapter's mma.sync flash kernels (flash_bf16.cuh: every thread loads its tiles
// and issues warp-sized products); here it runs the chapter's Hopper kernels on the same Q, K, V
// and dO by head, at head widths 64 and 128 (GPT-2 small to xl have heads of 64):
//  - the forward of attention/forward/08_optimized_attention_fused_overlap.cu (hopper/overlapped.cuh
//    on flash_tma.cuh's frame): a producer warp feeds K and V through the TMA, consumer warpgroups
//    multiply on wgmma, and each exponentiates a tile's scores while the previous tile's P V runs;
//  - the backward of attention/backward/05_optimized_attention_backward_fused_wgmma.cu
//    (hopper/backward_wgmma.cuh): a block of keys with its K and V kept in shared memory, Q and dO
//    streamed through the TMA, the five products on wgmma, dQ added by TMA bulk reductions.
// Other head widths (the checks' 16 and 32) keep the mma.sync kernels.
//
// Why it is faster: the attention was 2.04 ms of the previous step's 11.8 at small, context 1024
// (H100, --profile: the backward 1.49, the forward 0.55). Those kernels issue mma.sync, whose
// operands every warp first loads from shared memory into registers; wgmma reads them from shared
// memory itself, a warpgroup of four warps at a time, and the TMA copies the tiles without the
// threads. At the chapter's attention shapes (batch 8, 16 heads, 4096 tokens) the Hopper kernels
// are 1.5x to 1.8x faster forward and 1.7x backward than the mma.sync ones (results/
// attention_hopper_h100.md, attention_backward_hopper_h100.md); at GPT-2 small's (batch 4, 12
// heads, 1024 tokens) the grid is a few waves of the 132 SMs, and this step measures what is left.
//
// The arithmetic is the previous step's: bf16 operands, fp32 accumulation, the same online softmax
// (attention/kernels/online_softmax.cuh) and the same lse, so the check is the same
// ("bf16+bf16-attention"). The kernels need an sm_90 GPU and a build for sm_90a (this file's
// lab-arch line); elsewhere the step says N/A.
//
// What it replaces, against the previous step:
//   | before                                     | this step's                                          |
//   | ------------------------------------------ | ---------------------------------------------------- |
//   | flashbf16::forward (mma.sync)              | flashtma::launch<Overlapped> (TMA, wgmma, overlap)   |
//   | flashbf16::backward (mma.sync, dQ atomics) | flashtma::bwd::launch (TMA, wgmma, dQ by TMA adds)   |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_hopper
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// HopperAttention (gpt2/fused/hopper_attention.cuh, kept by the later bf16 steps): the Hopper
// kernels where the head width is 64 or 128, else the mma.sync ones (FlashBf16).
using FusedBf16Hopper = FusedStep<Bf16GradGemm, HopperAttention>;  // Bf16GradGemm: policies.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Hopper, LAB_STEP,
                       "fused, mixed precision, dY in bf16 where it is made, the attention on Hopper's TMA and wgmma "
                       "(the chapter's overlapped forward and wgmma backward at heads of 64 and 128; sm_90a)");
