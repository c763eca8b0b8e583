// Fused attention forward on Hopper, the softmax overlapped with the products inside each
// warpgroup: the previous step's ping-pong (flash_tma.cuh's frame, turns at the tensor cores), and
// a warpgroup no longer waits for both of its turn's products before its softmax. Its turn issues
// S_j = Q K_j^T first and O += P_{j-1} V_{j-1} second, as two commit groups; it waits for the first
// alone (wgmma.wait_group 1), exponentiates S_j while P_{j-1} V_{j-1} still runs, and only then
// waits for the second, rescales O by the new row maxima (Softmax::exponentiate and rescale, the
// two halves of Softmax::tile) and packs P_j. The P V product is asynchronous to the thread that
// issued it: its accumulators (O) and its A operand (P) stay untouched in registers until the
// wait, which is why the rescale moves after it and P_j is packed into the registers P_{j-1} frees
// only then. FlashAttention-3's "intra-warpgroup overlap": with the ping-pong, the tensor cores
// now wait neither for another warpgroup's softmax nor for their own.
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_overlap --shape 8x16x4096x128x0
#include "flash_tma.cuh"

namespace {

// A consumer warpgroup: S_0 on its first turn; then, turn by turn, S_j = Q K_j^T and O += P_{j-1} V_{j-1}
// issued together, S_j waited for and exponentiated under P_{j-1} V_{j-1}, then O rescaled; P_last V_last
// on the last turn.
struct Overlapped {
#if defined(LAB_SM90A)
  template <int D, bool Causal>
  __device__ static void consume(const flashtma::Work<D>& w) {
    constexpr int kStages = flashtma::Config<D>::kStages, NT = flashtma::Config<D>::kBc / 8;
    auto stage = [](int j) { return j % kStages; };
    auto parity = [](int j) { return unsigned(j / kStages) & 1; };
    const flashtma::Turns<D> turns{w.consumer};
    float acc[1][D / 8][4] = {};
    float(&od)[D / 2] = reinterpret_cast<float(&)[D / 2]>(acc);
    mma::Softmax<1> softmax;
    float s[1][NT][4];
    float(&sd)[4 * NT] = reinterpret_cast<float(&)[4 * NT]>(s);
    std::uint32_t a[NT / 2][4];  // P of the previous tile
    lab::tma::wait(w.ring.q_full, 0);
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
    flashtma::pack_p(s, a);
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
      flashtma::pack_p(s, a);
    }
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

using Overlap = flashtma::Forward<Overlapped>;
}  // namespace

#ifndef LAB_SCHEDULE_ONLY  // step 9 (optimized_attention_fused_split.cu) includes this file for Overlapped
LAB_VARIANT_CLASS_STEP(Overlap, 8,
                       "warp-specialised, ping-pong, and the softmax of tile j under the P V of tile j - 1 inside each "
                       "warpgroup (d = 64, 128; sm_90a): FlashAttention-3's schedule");
#endif
