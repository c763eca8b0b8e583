// Fused attention forward on Hopper, the consumer warpgroups in ping-pong: the previous step's
// frame (a TMA producer, an mbarrier ring, wgmma consumers; flash_tma.cuh), with the consumers
// taking turns at the tensor cores. In the previous step each warpgroup ran S = Q K^T, waited,
// ran its softmax (exp2, max, sums: the multi-function and FP32 units, not the tensor cores), then
// P V, and the warpgroups' phases fell as they fell: often all of them in their softmax at once,
// the tensor cores idle. Here a warpgroup issues its products only on its turn (a named barrier,
// flash_tma.cuh's Turns), and a turn's products are this tile's P V and the next tile's Q K^T
// together, so the order the tensor cores see is warpgroup 0's pair, 1's pair, 0's next pair ...
// and while one warpgroup's products run, the other computes its softmax: FlashAttention-3's
// "ping-pong" (two warpgroups at d = 128; three take turns at d = 64). Within a warpgroup nothing
// overlaps yet: it waits for both products before its softmax (the next step).
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_pingpong --shape 8x16x4096x128x0
#include "attention/hopper/flash_tma.cuh"

namespace {

// A consumer warpgroup: S_0 on its first turn; then, turn by turn, S_j = Q K_j^T and O += P_{j-1} V_{j-1}
// issued together, both waited for, the softmax of S_j; P_last V_last on the last turn.
struct PingPong {
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
    // Turn 0: S_0 alone.
    turns.wait();
    lab::tma::wait(w.ring.k_full + stage(0), parity(0));
    wgmma::fence();
    w.issue_scores(sd, stage(0));
    wgmma::commit();
    turns.pass(false);
    wgmma::wait<0>();
    w.ring.release_k(stage(0));
    mma::mask_scores<Causal>(s, w.key(0), w.rows0, w.qrow0, w.seq);
    softmax.tile(s, w.scale_log2, acc);
    flashtma::pack_p(s, a);
    for (int j = 1; j < w.tiles; ++j) {  // turn j: S_j and P_{j-1} V_{j-1}, both waited for
      turns.wait();
      lab::tma::wait(w.ring.k_full + stage(j), parity(j));
      lab::tma::wait(w.ring.v_full + stage(j - 1), parity(j - 1));
      wgmma::fence();
      w.issue_scores(sd, stage(j));
      w.issue_pv(od, a, stage(j - 1));
      wgmma::commit();
      turns.pass(false);
      wgmma::wait<0>();
      w.ring.release_k(stage(j));
      w.ring.release_v(stage(j - 1));
      mma::mask_scores<Causal>(s, w.key(j), w.rows0, w.qrow0, w.seq);
      softmax.tile(s, w.scale_log2, acc);
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

using Pingpong = flashtma::Forward<PingPong>;
}  // namespace

LAB_VARIANT_CLASS_STEP(Pingpong, LAB_STEP,
                       "warp-specialised, consumer warpgroups in ping-pong (d = 64, 128; sm_90a): one warpgroup's "
                       "softmax under the other's products");
