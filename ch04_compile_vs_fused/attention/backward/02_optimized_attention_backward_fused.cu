// Fused (flash) attention backward in fp32: P is never stored; it is recomputed tile by tile from
// Q, K and the forward's log-sum-exp (P = exp(scale Q K^T - lse)), which costs one more product
// than the eager backward and saves every seq x seq tensor. A block owns 64 keys: their K and V
// rows stay in shared memory and their dK, dV accumulate in registers while the block streams the
// query tiles (Q, dO, lse and delta = rowsum(dO o O), which a small kernel computes first). Per
// query tile: P^T and dP^T = V dO^T as 64 x 64 register blocks, dS^T = P^T o (dP^T - delta), both
// staged in shared memory; dV += P^T dO, dK += dS^T Q, and the tile's share of dQ = dS K added to
// dQ in device memory with atomics (every key tile contributes to every query row). Five products
// per tile pair, as the FLOP count says. Causal: a key tile starts at the diagonal.
// The kernel: flash_fp32.cuh (shared with the GPT-2 step's fused variant).
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused
#include "attention/attention.cuh"
#include "attention/kernels/flash_fp32.cuh"

namespace {

// The variant's state: O and lse as the fused forward leaves them (computed before timing), and
// delta = rowsum(dO o O), computed at the start of every run.
struct Fused {
  using Topic = AttentionBackward;
  attn::SavedOutput saved;
  Fused(const AttentionBackward::Problem& p, cudaStream_t stream) : saved(p, stream) {}

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    saved.prologue(a, p.dout.data(), p.dq.data(), stream);  // delta, and dQ = 0 for the atomics
    flash::backward(p.q.data(), p.k.data(), p.v.data(), p.dout.data(), saved.lse.data(), saved.delta.data(),
                    p.dq.data(), p.dk.data(), p.dv.data(), a.bh(), a.seq, a.d, a.causal, a.scale(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Fused, LAB_STEP, "fused (flash) fp32: P recomputed per tile from lse, no seq^2 tensor");
