// Fused attention backward on Hopper: the previous step's algorithm (P recomputed from lse, a block
// per key block, the five products in bf16 with fp32 accumulation) with the Hopper forward's
// machinery (flash_tma.cuh's tensor maps and limits, lab/tma.cuh, wgmma.cuh): a producer warp feeds
// the block through the TMA and mbarriers, consumer warpgroups compute on wgmma, and the dQ
// accumulation leaves the threads altogether.
//  - A block owns 128 keys (192 at d = 64): the producer copies its K and V once, then streams
//    64-query tiles of Q and dO through a two-stage ring. Each consumer warpgroup owns 64 keys.
//  - Per query tile a consumer issues S^T = K Q^T and dP^T = V dO^T (m64n64k16, both operands read
//    from shared memory by descriptor, no ldmatrix), turns them into P^T and dS^T in registers, and
//    feeds them back as the A operands of dV += P^T dO and dK += dS^T Q (m64nDk16, dO and Q read
//    N-major as they lie). dV and dK stay in registers for the whole sweep (2 x d / 2 a thread, the
//    reason for 240 registers a consumer: the producer gives its registers back with setmaxnreg).
//  - dQ = dS K needs dS the other way round: dS^T goes to shared memory (bf16, 128-byte swizzle),
//    where wgmma reads it M-major (transposed), and K N-major. The previous step then added each
//    warp's dQ to device memory with a vector atomic per two elements, 64 x d atomics a tile and a
//    warp, and they were its bottleneck. Here the warpgroup writes its 64 x d partial dQ to shared
//    memory once (swizzled, so the stores are free of bank conflicts) and one thread hands it to
//    the TMA as d / 32 tensor reductions (cp.reduce.async.bulk.tensor .add, a float tensor map over
//    dQ): the additions happen in L2, no thread issues them, and the next tile's products run
//    meanwhile.
// The kernel runs at d = 64 and 128 on sm_90 (its file says lab-arch: sm_90a); elsewhere N/A.
// Tolerance: bf16, as the previous step.
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma --shape 8x16x4096x128x0
// The kernel, its launch and the variant class (flashtma::bwd::Backward, its state: the saved
// forward, the bf16 inputs, the tensor maps) are in hopper/backward_wgmma.cuh, which the next step
// and the GPT-2 steps of the Hopper attention share; this step runs it with dQ unsplit.
#include "attention/hopper/backward_wgmma.cuh"

namespace {
using Wgmma = flashtma::bwd::Backward<flashtma::bwd::kDqPerConsumer>;
}  // namespace

LAB_VARIANT_CLASS_STEP(Wgmma, LAB_STEP,
                       "warp-specialised on Hopper (d = 64, 128; sm_90a): TMA-fed K/V blocks and Q/dO tiles, all five "
                       "products on wgmma, dQ added by TMA bulk reductions");
