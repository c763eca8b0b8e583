// Fused attention forward on Hopper with warp specialisation: the previous step's wgmma products,
// now fed by the tensor memory accelerator (TMA) instead of by the computing threads. One warpgroup
// of the block is the producer: a single thread of it asks the TMA for Q once and then for every K
// and V tile, into a ring of shared-memory stages, each guarded by two mbarriers ("full": the copy's
// bytes have landed; "empty": every consumer warp is done with the stage). The other warpgroups
// are consumers, 64 queries each: they wait on "full", run Q K^T and P V on wgmma, and arrive on
// "empty". In the previous step every thread copied (cp.async), then the whole block met at
// __syncthreads four times a tile; here nobody waits for anybody but the data, the copies of the
// next tiles run under this tile's products, and the producer gives its registers to the consumers
// (setmaxnreg), which hold a 128-key tile of scores (64 registers), the output (d / 2) and P.
// The TMA also writes the tiles in the 128-byte-swizzled layout wgmma reads, V included: P V reads
// V N-major (d contiguous, as V lies in memory), so the previous step's V^T transpose pass is gone.
// The frame (block shape, ring, producer, tensor maps) is flash_tma.cuh, shared with the next two
// steps; this file is the consumers' schedule, the previous step's: wait for Q K^T, softmax, wait
// for P V, next tile. The softmax, mask and output are the earlier steps' helpers (mma_tiles.cuh).
// What remains before FlashAttention-3: the tensor cores idle while a warpgroup's softmax runs.
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_tma --shape 8x16x4096x128x0
#include "attention/hopper/flash_tma.cuh"

namespace {

// A consumer warpgroup, tile by tile: S = Q K^T, wait, free K; softmax; O += P V, wait, free V.
struct InOrder {
#if defined(LAB_SM90A)
  template <int D, bool Causal>
  __device__ static void consume(const flashtma::Work<D>& w) {
    constexpr int kStages = flashtma::Config<D>::kStages, NT = flashtma::Config<D>::kBc / 8;
    float acc[1][D / 8][4] = {};
    float(&od)[D / 2] = reinterpret_cast<float(&)[D / 2]>(acc);
    mma::Softmax<1> softmax;
    lab::tma::wait(w.ring.q_full, 0);
    for (int j = 0; j < w.tiles; ++j) {
      const int st = j % kStages;
      const unsigned parity = (j / kStages) & 1;
      float s[1][NT][4];
      lab::tma::wait(w.ring.k_full + st, parity);
      wgmma::fence();
      w.issue_scores(reinterpret_cast<float(&)[4 * NT]>(s), st);
      wgmma::commit();
      wgmma::wait<0>();
      w.ring.release_k(st);

      mma::mask_scores<Causal>(s, w.key(j), w.rows0, w.qrow0, w.seq);
      softmax.tile(s, w.scale_log2, acc);
      std::uint32_t a[NT / 2][4];
      flashtma::pack_p(s, a);

      lab::tma::wait(w.ring.v_full + st, parity);
      wgmma::fence();
      w.issue_pv(od, a, st);
      wgmma::commit();
      wgmma::wait<0>();
      w.ring.release_v(st);
    }
    w.out.write(softmax, acc, w.qrow0);
  }
#endif
};

using Tma = flashtma::Forward<InOrder>;
}  // namespace

LAB_VARIANT_CLASS_STEP(Tma, LAB_STEP,
                       "warp-specialised on Hopper (d = 64, 128; sm_90a): a producer warp feeds K and V through the "
                       "TMA and mbarriers, consumer warpgroups on wgmma");
