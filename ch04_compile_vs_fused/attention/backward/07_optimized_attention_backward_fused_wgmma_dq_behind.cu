// Fused attention backward on Hopper, dQ one tile behind: the previous step's kernel, with each
// consumer making dQ's columns of the tile before, after dV and dK of this one.
//  - In the previous step a consumer's dQ product of a tile reads both consumers' dS^T of that
//    tile, so each waits at every tile for the other to have written it: the two consumer
//    warpgroups run in step, their products issued together and their softmaxes and stores run
//    together, while the tensor cores wait (38% active at d = 128 in step 5).
//  - Here a consumer makes dQ of tile n - 1 after dV and dK of tile n: the other's dS^T of tile
//    n - 1 was written half a tile or more before, so the consumers are held together only loosely
//    (the ring of Q and dO, and three dS^T buffers each). And the second consumer's first products
//    wait on the first's (a named barrier, once), so they start half a phase apart: one's softmax
//    and stores run while the other's products hold the tensor cores (FlashAttention-3's forward
//    takes turns between its warpgroups for the same reason).
//  - A dS^T buffer is written again three tiles on; each has a second mbarrier on which every
//    warp of both consumers arrives once its dQ product has read it, and its writer waits on it.
// At d = 64 (three consumers of 64 keys) the kernel is step 5's: the split, and with it this
// schedule, applies at d = 128 with two consumers (Bwd::kDqBehind in hopper/backward_wgmma.cuh,
// where the change is).
// Tolerance: bf16, as the previous step (the same products, summed in the same order).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma_dq_behind --shape 8x16x4096x128x1
#include "attention/hopper/backward_wgmma.cuh"

namespace {
using DqBehind = flashtma::bwd::Backward<flashtma::bwd::kDqSplitBehind>;
}  // namespace

LAB_VARIANT_CLASS_STEP(DqBehind, LAB_STEP,
                       "the previous step with dQ made one tile behind dV and dK, and the second consumer started "
                       "one product behind the first (d = 128): the consumers no longer wait on each other at "
                       "every tile");
