// The overlapped consumer schedule of a warp-specialised attention forward on Hopper, on the ring
// frame of flash_tma.cuh: a consumer warpgroup issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} as two
// commit groups, waits for the first alone and exponentiates S_j while P_{j-1} V_{j-1} still runs
// (FlashAttention-3's intra-warpgroup overlap). Two steps launch it:
// forward/08_optimized_attention_fused_overlap.cu, where the lesson is told, on the frame's grid, and
// forward/09_optimized_attention_fused_split.cu from a planned list of blocks.
// lab-arch: sm_90a
#pragma once

#include "attention/hopper/flash_tma.cuh"

namespace flashtma {


// A consumer warpgroup: S_0 on its first turn; then, turn by turn, S_j = Q K_j^T and O += P_{j-1} V_{j-1}
// issued together, S_j waited for and exponentiated under P_{j-1} V_{j-1}, then O rescaled; P_last V_last
// on the last turn.
struct Overlapped {
  static constexpr bool kRunsItems = true;  // consume honours Work::base, q_parity and q_empty (persistent blocks)
#if defined(LAB_SM90A)
  template <int D, bool Causal, class T>
  __device__ static void consume(const flashtma::Work<D, T>& w) {  // T: bf16, or fp16 (the package's)
    constexpr int NT = flashtma::Config<D>::kBc / 8;
    auto stage = [&](int j) { return w.stage(j); };  // the ring's stage and phase of tile j
    auto parity = [&](int j) { return w.parity(j); };
    const flashtma::Turns<D> turns{w.consumer};
    float acc[1][D / 8][4] = {};
    float(&od)[D / 2] = reinterpret_cast<float(&)[D / 2]>(acc);
    mma::Softmax<1> softmax;
    float s[1][NT][4];
    float(&sd)[4 * NT] = reinterpret_cast<float(&)[4 * NT]>(s);
    std::uint32_t a[NT / 2][4];  // P of the previous tile
    lab::tma::wait(w.ring.q_full, w.q_parity);
    turns.start();
    float alpha[1][2];
    // Turn 0: S_0 alone; O is still zero, nothing to rescale.
    turns.wait();
    lab::tma::wait(w.ring.k_full + stage(0), parity(0));
    wgmma::fence();
    w.issue_scores(sd, stage(0));
    wgmma::commit();
    turns.pass(false);
    wgmma::wait<0>();
    w.ring.release_k(stage(0));
    mma::mask_scores<Causal>(s, w.key(0), w.rows0, w.qrow0, w.seq);
    softmax.exponentiate(s, w.scale_log2, alpha);
    w.pack(s, a);
    for (int j = 1; j < w.tiles; ++j) {  // turn j: S_j, then P_{j-1} V_{j-1}, two commit groups
      turns.wait();
      lab::tma::wait(w.ring.k_full + stage(j), parity(j));
      lab::tma::wait(w.ring.v_full + stage(j - 1), parity(j - 1));
      wgmma::fence();
      w.issue_scores(sd, stage(j));
      wgmma::commit();
      w.issue_pv(od, a, stage(j - 1));
      wgmma::commit();
      turns.pass(false);
      wgmma::wait<1>();  // S_j has landed; P_{j-1} V_{j-1} may still run
      w.ring.release_k(stage(j));
      mma::mask_scores<Causal>(s, w.key(j), w.rows0, w.qrow0, w.seq);
      const bool rescale = softmax.exponentiate(s, w.scale_log2, alpha);
      wgmma::wait<0>();  // now O and P_{j-1} are free
      w.ring.release_v(stage(j - 1));
      if (rescale) mma::Softmax<1>::rescale(acc, alpha);
      w.pack(s, a);
    }
    w.release_q();  // every S has landed: Q is free for the block's next item (if it has one)
    // The last turn: P_last V_last alone.
    turns.wait();
    lab::tma::wait(w.ring.v_full + stage(w.tiles - 1), parity(w.tiles - 1));
    wgmma::fence();
    w.issue_pv(od, a, stage(w.tiles - 1));
    wgmma::commit();
    turns.pass(true);
    wgmma::wait<0>();
    w.ring.release_v(stage(w.tiles - 1));
    w.out.write(softmax, acc, w.qrow0);
  }
#endif
};

}  // namespace flashtma
