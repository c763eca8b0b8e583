// Fused attention backward on Hopper, query tiles of 128 at d = 64: step 10's kernel (P^T under
// dP^T's product, the consumers' products in turns) with two consumers whose S^T and dP^T are
// 64 keys x 128 queries, and dQ split by queries.
//  - At d = 64 step 10 runs three consumers of 64 keys on tiles of 64 queries: every product is an
//    m64n64, each consumer hands the turn on twice a tile and meets its warpgroup's barriers three
//    times, and Nsight Compute finds the tensor pipe active 41% of the time with the warps' largest
//    stall at those barriers (results/attention_backward_h100_s94/).
//  - Here a tile is 128 queries (two TMA boxes of Q and of dO) and a block two consumers of 64 keys
//    (128 keys). S^T = K Q^T and dP^T = V dO^T are m64n128k16 products (64 accumulators each, as in
//    FlashAttention-3's 128 x 128 tiles at d = 64), dV and dK take 8 products of 16 queries a tile,
//    and dQ is split by queries: consumer c makes the tile's queries 64 c to 64 c + 63 over both
//    consumers' keys, reading both dS^T (each written in two 64-query regions), so a block adds one
//    64 x 64 tile of dQ a consumer a tile of 128 queries: half the L2's additions of step 10. The
//    same products per query and key, half the handoffs.
//  - At d = 128 (dQ split by columns) the step runs step 11's kernel.
// The change is Bwd::kTall in hopper/backward_wgmma.cuh.
// Tolerance: bf16, as the previous steps: the same products (sums over d, over the keys for dQ and
// over the queries for dV and dK, in fp32 accumulators), grouped in other tiles.
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma_tall --shape 8x16x4096x64x0
#include "attention/hopper/backward_wgmma.cuh"

namespace {
struct Tall : flashtma::bwd::Backward<flashtma::bwd::kTallTiles> {
  using Backward::Backward;
  // The topic's check shapes at d = 64 have one or two heads of one key tile (of 128 keys) or a few:
  // two more with several key tiles in several heads, their last query tile cut short (520 = 4 x 128
  // + 8), under the mask and without (1.0e9 and 5.7e8 FLOPs for the CPU reference).
  static lab::Declared declared() {
    return {.precision = "bf16", .checks = {lab::Shape{2, 3, 520, 64, 1}, lab::Shape{3, 2, 384, 64, 0}}};
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Tall, LAB_STEP,
                       "step 10's kernel at d = 64 on query tiles of 128, two consumers, dQ split by queries: "
                       "m64n128 products for S^T and dP^T, half the handoffs");
