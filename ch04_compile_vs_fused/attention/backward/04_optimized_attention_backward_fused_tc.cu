// Fused attention backward on tensor cores: the fused backward's algorithm (P recomputed per tile
// from lse, no seq^2 tensor) with bf16 inputs, fp32 accumulation and all five products on
// mma.sync m16n8k16 (FlashAttention-2's arrangement). A block of 4 warps owns 64 keys, a warp 16
// of them, and streams 64-query tiles of Q and dO through shared memory (cp.async, two buffers:
// the next tile's copy runs under this tile's arithmetic). Per query tile a warp computes its
// keys' rows of S^T = K Q^T and dP^T = V dO^T in accumulator registers, turns them into P^T and
// dS^T = P^T o (dP^T - delta) in place, and feeds them straight back as A operands of
// dV += P^T dO and dK += dS^T Q (accumulated in registers over the whole sweep). dQ = dS K needs
// dS the other way round: dS^T goes through shared memory once (bf16), and each warp adds its
// 16 queries' share to dQ in device memory with fp32 atomics, two adjacent columns per 8-byte
// vector atomic (sm_90). Those atomics are the kernel's bottleneck: every key block adds a full
// seq x d to dQ, seq^2 d / 64 additions a head in all, and with one float per atomic the kernel
// took 1.6 times as long (H100, d = 128). Tolerance: bf16.
// The kernel is in flash_bf16.cuh, which the Python bridge shares.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_tc
#include "attention/attention.cuh"
#include "attention/kernels/flash_bf16.cuh"

namespace {

// The variant's state: O and lse as the forward leaves them, delta, and the bf16 copies of Q, K, V
// and dO (made before timing).
struct TensorCores {
  using Topic = AttentionBackward;
  attn::SavedOutput saved;
  attn::Bf16Inputs in16;
  TensorCores(const AttentionBackward::Problem& p, cudaStream_t stream)
      : saved(p, stream), in16(p, stream, p.dout.data()) {}
  static lab::Declared declared() { return {.precision = "bf16"}; }

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    saved.prologue(a, p.dout.data(), p.dq.data(), stream);  // delta, and dQ = 0 for the atomics
    flashbf16::backward(in16.q.data(), in16.k.data(), in16.v.data(), in16.dout.data(), saved.lse.data(),
                        saved.delta.data(), p.dq.data(), p.dk.data(), p.dv.data(), a.bh(), a.seq, a.d, a.causal,
                        a.scale(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(TensorCores, LAB_STEP, "fused on tensor cores: bf16 mma.sync for all five products, fp32 accumulation");
