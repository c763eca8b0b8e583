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
// The kernel and its launch are in hopper/backward_wgmma.cuh (the GPT-2 step of the Hopper attention
// launches it too).
#include "attention/hopper/backward_wgmma.cuh"

namespace {

// The variant's state: O, lse and delta as the forward leaves them, the bf16 copies of Q, K, V and
// dO (made before timing), and the tensor maps over them (K and V by 128 keys, Q and dO by 64
// queries).
struct Wgmma {
  using Topic = AttentionBackward;
  attn::SavedOutput saved;
  attn::Bf16Inputs in16;
  flashtma::bwd::Maps maps;
  const float* mapped_dq = nullptr;  // the dQ buffer maps.dq describes
  Wgmma(const AttentionBackward::Problem& p, cudaStream_t stream)
      : saved(p, stream), in16(p, stream, p.dout.data()) {
    const attn::Dims& a = p.dims;
    if (a.d != 64 && a.d != 128) return;  // supports() says N/A
    flashtma::bwd::prepare(a.d, a.causal);
  }
  static lab::Declared declared() { return {.precision = "bf16"}; }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) { return flashtma::supports(s, dev); }

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    saved.prologue(a, p.dout.data(), p.dq.data(), stream);  // delta, and dQ = 0 for the reductions
    if (p.dq.data() != mapped_dq) {  // the maps over Q, K, V, dO and this dQ (host work only)
      maps = flashtma::bwd::maps(in16.q.data(), in16.k.data(), in16.v.data(), in16.dout.data(), p.dq.data(), a.bh(),
                                 a.seq, a.d);
      mapped_dq = p.dq.data();
    }
    flashtma::bwd::launch(maps, saved.lse.data(), saved.delta.data(), p.dk.data(), p.dv.data(), a.bh(), a.seq, a.d,
                          a.causal, a.scale(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Wgmma, LAB_STEP,
                       "warp-specialised on Hopper (d = 64, 128; sm_90a): TMA-fed K/V blocks and Q/dO tiles, all five "
                       "products on wgmma, dQ added by TMA bulk reductions");
