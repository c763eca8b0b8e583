// Fused attention backward in fp32 on tensor cores: the fused fp32 backward's algorithm (P
// recomputed per tile from lse, dK and dV summed in registers over the query tiles, dQ added with
// atomics), its inputs, outputs and tolerance, with all five products (S^T = K Q^T, dP^T = V dO^T,
// dV += P^T dO, dK += dS^T Q, dQ += dS K) in 3xTF32 on mma.sync m16n8k8, as the 3xTF32 forward
// computes its two. The SIMT backward spends 64 FMAs of its thread's 4 x 4 register block on
// every 32 bytes it reads from shared memory and runs at about a third of the FP32 peak; the tensor
// cores take the same products at three tf32 instructions each, several times the SIMT rate even
// after the splits.
//
// The arrangement is the bf16 tensor-core backward's (FlashAttention-2): a block of 4 warps owns 64
// keys, a warp 16 of them, and streams query tiles through two shared buffers. Two things differ.
// The layouts are chosen for fp32 fragments, which ldmatrix cannot load: rows d + 4 floats apart,
// and each product's k index paired so that either its fragments come straight from the previous
// product's accumulators or its loads are free of bank conflicts (flash_3xtf32.cuh spells them
// out). And no sum stays in the tensor cores for more than one tile: each tile's share of dV and dK
// is summed apart and added in fp32, since a tensor core's accumulation truncates and, over
// thousands of queries, its errors would drift one way.
// The kernel: flash_3xtf32.cuh (shared with the GPT-2 step's tensor-core attention).
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_3xtf32
#include "attention/attention.cuh"
#include "attention/kernels/flash_3xtf32.cuh"

namespace {

// The variant's state: O and lse as the fused forward leaves them (computed before timing), and
// delta = rowsum(dO o O), computed at the start of every run.
struct ThreeTf32 {
  using Topic = AttentionBackward;
  attn::SavedOutput saved;
  ThreeTf32(const AttentionBackward::Problem& p, cudaStream_t stream) : saved(p, stream) {}
  static lab::Declared declared() { return {.precision = "3xtf32"}; }

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    saved.prologue(a, p.dout.data(), p.dq.data(), stream);  // delta, and dQ = 0 for the atomics
    flash3x::backward(p.q.data(), p.k.data(), p.v.data(), p.dout.data(), saved.lse.data(), saved.delta.data(),
                      p.dq.data(), p.dk.data(), p.dv.data(), a.bh(), a.seq, a.d, a.causal, a.scale(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(ThreeTf32, LAB_STEP,
                       "fused fp32 on tensor cores: 3xTF32 mma.sync for all five products, fp32 accuracy");
