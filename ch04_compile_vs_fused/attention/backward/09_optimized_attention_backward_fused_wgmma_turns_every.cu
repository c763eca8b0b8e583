// Fused attention backward on Hopper, the turns at every head size: the previous step's kernel, with
// the consumers taking turns where dQ is not split too (d = 64).
//  - The previous step's turns came with the split of dQ (d = 128, two consumers), where the
//    consumers read each other's dS^T and the turns keep them half a phase apart. At d = 64 each of
//    the three consumers (192 keys a block; two in the GPT-2 steps) makes all of dQ over its own 64
//    keys and never waits on another: nothing holds them in step, and nothing keeps them apart
//    either, so their products and their softmaxes drift together and apart by chance.
//  - Here they take turns there too, in a ring (a named barrier a consumer, ids 4 to 6: consumer c
//    passes to c + 1, the last to the first): S^T and dP^T one turn, dV, dK and dQ the next, so the
//    tensor cores run one consumer's products while the others run their softmaxes and stores.
// At d = 128 (two consumers, dQ split) the kernel is the previous step's (Bwd::kTurns in
// hopper/backward_wgmma.cuh, where the change is).
// Tolerance: bf16, as the previous step (the same products, summed in the same order).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma_turns_every --shape 8x16x4096x64x0
#include "attention/hopper/backward_wgmma.cuh"

namespace {
using TurnsEvery = flashtma::bwd::Backward<flashtma::bwd::kTurnsEvery>;
}  // namespace

LAB_VARIANT_CLASS_STEP(TurnsEvery, LAB_STEP,
                       "the previous step with the consumers taking turns where dQ is not split too (d = 64): "
                       "a ring of turns, each one's softmax under the others' products");
