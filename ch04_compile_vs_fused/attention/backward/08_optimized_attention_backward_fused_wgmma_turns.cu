// Fused attention backward on Hopper, the consumers in turns: the previous step's kernel (dQ one tile
// behind), with the two consumer warpgroups issuing their products in strict turns.
//  - The previous step frees the consumers from waiting on each other at every tile and starts the
//    second one product behind the first, hoping the skew lasts: while one runs its softmax and
//    stores, the other's products have the tensor cores. Nothing keeps it so: two warpgroups that
//    drift back into step issue their products together again and leave the tensor cores idle
//    together.
//  - Here the skew is kept by construction, as the forward's ping-pong step keeps its own: each
//    consumer waits for its turn before issuing products and passes it once they are issued (a
//    named barrier a consumer, ids 4 and 5). A consumer's tile has two turns: S^T and dP^T, then dV,
//    dK and dQ of the tile before. So the tensor cores run the first's S^T and dP^T, the second's,
//    the first's dV, dK and dQ, the second's; each consumer's softmax runs under the other's
//    products, and its dQ stores under the other's next ones.
// At d = 64 (three consumers of 64 keys) the kernel is step 5's: the split, and with it this
// schedule, applies at d = 128 with two consumers (Bwd::kTurns in hopper/backward_wgmma.cuh, where
// the change is).
// Tolerance: bf16, as the previous step (the same products, summed in the same order).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma_turns --shape 8x16x4096x128x1
#include "attention/hopper/backward_wgmma.cuh"

namespace {
using Turns = flashtma::bwd::Backward<flashtma::bwd::kDqSplitTurns>;
}  // namespace

LAB_VARIANT_CLASS_STEP(Turns, LAB_STEP,
                       "the previous step with the two consumers issuing their products in turns (d = 128): each "
                       "one's softmax and stores run under the other's products, by construction");
