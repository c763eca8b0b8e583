// Fused attention backward on Hopper, on persistent blocks: the previous step's kernel, with a block
// an SM walking key tiles instead of a block a key tile.
//  - A block of the previous steps pays for its start and its end with nothing to overlap them:
//    its K and V copied and its first Q and dO before the first product, its last dQ product and
//    the bulk reduction after the last, dK and dV stored while the tensor cores wait, and the block
//    after it started only once it has left the SM. Timed on an H100 (the hopper README's "Where a
//    block's time goes"), that is about 7 us a block, 2.5 query tiles' work: 6.5% of the causal
//    kernel at (8, 16, 4096, 128) and 21% at GPT-2 small's shape.
//  - Here min(key tiles, SMs) blocks each take the order's next key tile from a counter as they
//    finish one (longest first under the mask, as the grid's scheduler hands out blocks). The
//    producer copies the next key tile's first Q and dO into the first stage that frees, and its K
//    and V once every consumer's last product of this key tile has read them (kv_empty), while the
//    consumers reduce the last dQ and store dK and dV; the stages', the dS^T buffers' and the
//    barriers' phases run on across key tiles. The same products and arithmetic, in the same order.
//  - At d = 128 only, where dQ is split across the two consumers. At d = 64 (three consumers) the
//    step runs the previous step's kernel: persistent blocks there were slower on an H100 (session
//    90: 2.50 ms against 2.34 at (8, 16, 4096, 64) causal, 102 us against 95.5 at GPT-2 small's
//    shape), while at d = 128 they took 3.40 ms against 3.49 causal and 5.75 against 5.85 unmasked
//    at (8, 16, 4096, 128) (results/attention_backward_h100_s90/).
// The change is Bwd::kPersist in hopper/backward_wgmma.cuh.
// Tolerance: bf16, as the previous step (the same products, summed in the same order).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_wgmma_persistent --shape 8x16x4096x128x1
#include "attention/hopper/backward_wgmma.cuh"

namespace {
struct Persistent : flashtma::bwd::Backward<flashtma::bwd::kPersistent> {
  using Backward::Backward;
  // A block runs more than one key tile only where a shape has more key tiles (of 128 keys at
  // d = 128) than the GPU has SMs, which the topic's check shapes do not: two that do, within the
  // CPU reference's 4e9 FLOPs (10 bh seq^2 d, halved by the mask): 192 key tiles under the mask (3.4e9;
  // the last of each head 32 keys long, the key tiles' lengths unequal) and 160 without (3.4e9).
  static lab::Declared declared() {
    return {.precision = "bf16", .checks = {lab::Shape{4, 16, 288, 128, 1}, lab::Shape{20, 8, 128, 128, 0}}};
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Persistent, LAB_STEP,
                       "the previous step on persistent blocks (d = 128): the next key tile's K, V, Q and dO "
                       "copied while this one's dK and dV are stored");
