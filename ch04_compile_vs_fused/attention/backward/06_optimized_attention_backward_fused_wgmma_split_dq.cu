// Fused attention backward on Hopper, dQ split by columns: the previous step's kernel, with dQ's
// product divided between the two consumer warpgroups by its columns rather than by the keys.
//  - In the previous step each consumer owns 64 of the block's 128 keys (d = 128) and makes a
//    partial dQ = dS K over them for all 128 columns: 64 x 128 fp32 a query tile, which the TMA
//    adds to dQ in L2 (cp.reduce.async.bulk.tensor). Two consumers, two full tiles of reductions
//    a block a query tile: 64 KB. At (8, 16, 4096, 128) that is about 17 GB of additions into L2
//    in a 7 ms kernel.
//  - Here each consumer makes 64 of dQ's columns over all 128 keys, reading both consumers' dS^T
//    from shared memory, and reduces only its half: one 64 x 128 tile a block a query tile, half
//    the L2 reductions, and a partial of 16 KB instead of 32 (FlashAttention-3 splits its dQ
//    product the same way across its MMA warpgroups).
//  - The price is that the consumers now read each other's dS^T. Each writes its dS^T into one of
//    two buffers by the tile's parity and says so on an mbarrier (a warp's arrival each, four a
//    buffer); each waits on both consumers' mbarriers of the tile before its dQ product. A buffer
//    is written again two tiles on, after its writer has waited on the other consumer's next
//    tile, which came after that consumer's reads: so neither consumer waits on the other at a
//    barrier of the whole block, and they need not run in step.
// At d = 64 (three consumers of 64 keys) the kernel is the previous step's: the split applies at
// d = 128 with two consumers (Bwd::kSplitDq in hopper/backward_wgmma.cuh, where the change is).
// Tolerance: bf16, as the previous step (the same products, summed in another order).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma_split_dq --shape 8x16x4096x128x0
#include "attention/hopper/backward_wgmma.cuh"

namespace {
using SplitDq = flashtma::bwd::Backward<flashtma::bwd::kDqSplit>;
}  // namespace

LAB_VARIANT_CLASS_STEP(SplitDq, LAB_STEP,
                       "the previous step with dQ's product split by columns across the consumers (d = 128): one "
                       "TMA reduction of dQ a block a query tile, not one a consumer");
