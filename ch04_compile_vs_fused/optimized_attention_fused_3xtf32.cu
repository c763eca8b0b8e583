// Fused attention forward in fp32 on tensor cores: the fused fp32 variant's algorithm (online
// softmax over K/V tiles, no seq^2 tensor), its inputs and outputs, its tolerance, with both
// products on mma.sync m16n8k8 in "3xTF32". A tensor core multiplies tf32 (fp32 with a 10-bit
// mantissa) at about 7 times the rate of fp32 FMA on the SIMT units (H100: 495 against 67 TFLOP/s);
// alone it would lose 13 bits of every input. Splitting each fp32 value into two tf32 values, x =
// big + small, and summing three products (small b_big + big b_small + big b_big) keeps about 21
// bits: fp32 accuracy, the tolerance of the fp32 variants, at a third of the tensor cores' tf32
// rate, still twice the SIMT units' fp32 rate. It is how CUTLASS, and PyTorch's fp32 attention, use
// tensor cores for fp32.
//
// The arrangement is the bf16 variant's (FlashAttention-2): 4 warps, each owning 32 queries, so a
// row's softmax stays within a quad of lanes and the scores never leave the accumulator registers;
// K and V tiles arrive by cp.async. Two layouts avoid any shuffle or staging in shared memory. The k
// index of a product may be taken in any order as long as A and B agree, so a lane's k-pair
// (t, t + 4) is mapped to the adjacent columns (2t, 2t + 1): the Q and K fragments are one 8-byte
// load each, and the scores' accumulators (columns 2t, 2t + 1) are already P's A fragments for
// O += P V, V's rows read in the same order. Row strides of D + 8 (Q, K) and D + 4 (V) floats keep
// the fragment loads free of bank conflicts. Inputs stay fp32 in memory and are split as each
// fragment is loaded: four instructions a value (mma::split_tf32), which is where this kernel's
// time goes after the tensor cores (with cvt.rna.tf32 for the split it ran 1.2 to 1.6 times slower).
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_3xtf32
#include "attention.cuh"
#include "flash_tiles.cuh"
#include "mma_tiles.cuh"

namespace {

// The block: 4 warps, each owning two m16 tiles of queries (a K or V fragment, split once, feeds
// both), so 128 queries, and kBc keys a tile. One buffer for K and one for V, in
// FlashAttention-2's schedule: the next K tile is copied while the softmax and P V run, the next V
// tile while Q K^T runs. Double buffering both would overlap no more and, at d = 128, take 138 KiB
// of shared memory: one block an SM instead of two, which measured slower (the chapter README
// gives the figure).
template <int D>
struct Config {
  static constexpr int kWarps = 4, kThreads = 32 * kWarps;
  static constexpr int MT = 2;
  static constexpr int kBr = 16 * MT * kWarps;
  static constexpr int kBc = D == 128 ? 32 : 64;
  static constexpr int kQK = D + 8;  // row stride of the Q and K tiles, floats
  static constexpr int kV = D + 4;   // of the V tiles
  static constexpr int kSmemBytes = 4 * (kBr * kQK + kBc * (kQK + kV));
  static constexpr int kMinBlocks = kSmemBytes * 2 <= 227 * 1024 ? 2 : 1;
};

template <int D, bool Causal>
__global__ void __launch_bounds__(Config<D>::kThreads, Config<D>::kMinBlocks)
    flash_forward_3xtf32(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                         float* __restrict__ o, float* __restrict__ lse, int seq, float scale_log2) {
  using C = Config<D>;
  constexpr int MT = C::MT, kBr = C::kBr, kBc = C::kBc, NT = kBc / 8, kQK = C::kQK, kV = C::kV;
  constexpr int kThreads = C::kThreads;
  extern __shared__ float4 smem[];
  float* qs = reinterpret_cast<float*>(smem);  // Q, the K tile, the V tile
  float* ks = qs + kBr * kQK;
  float* vs = ks + kBc * kQK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = tile * kBr;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D;
  q += head, k += head, v += head, o += head;

  mma::load_rows_async<kBr, D, kQK, kThreads>(qs, q, row0, seq);
  mma::load_rows_async<kBc, D, kQK, kThreads>(ks, k, 0, seq);
  mma::cp_async_commit();  // copy groups: Q and K tile 0; V tile 0; then per tile K kt + 1, V kt + 1
  mma::load_rows_async<kBc, D, kV, kThreads>(vs, v, 0, seq);
  mma::cp_async_commit();

  float acc[MT][D / 8][4] = {};
  mma::Softmax<MT> softmax;  // each row's running max and sum
  const int wrow = 16 * MT * warp;    // the warp's first row in the block
  const int qrow0 = row0 + wrow + g;  // this lane's rows: qrow0 + 16 mt + 8 h

  const int last = Causal ? min(seq, row0 + kBr) : seq;  // keys [0, last) matter
  const int tiles = (last + kBc - 1) / kBc;
  float s[MT][NT][4];  // the tile's scores, then its probabilities
  mma::sweep_kv(
      tiles, [&](int kt) { mma::load_rows_async<kBc, D, kQK, kThreads>(ks, k, kt * kBc, seq); },
      [&](int kt) { mma::load_rows_async<kBc, D, kV, kThreads>(vs, v, kt * kBc, seq); },
      [&](int kt) {
        // S = Q K^T, 8 of d at a time; k-pair (t, t + 4) of the step is columns (2t, 2t + 1).
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n = 0; n < NT; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 8; ++kk) {
          mma::Split a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            const float* qr = qs + (wrow + 16 * mt + g) * kQK + 8 * kk + 2 * t;
            const float2 lo = *reinterpret_cast<const float2*>(qr);
            const float2 hi = *reinterpret_cast<const float2*>(qr + 8 * kQK);
            a[mt][0] = mma::split_tf32(lo.x), a[mt][1] = mma::split_tf32(hi.x);
            a[mt][2] = mma::split_tf32(lo.y), a[mt][3] = mma::split_tf32(hi.y);
          }
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const float2 b = *reinterpret_cast<const float2*>(ks + (8 * n + g) * kQK + 8 * kk + 2 * t);
            const mma::Split b0 = mma::split_tf32(b.x), b1 = mma::split_tf32(b.y);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma::mma_3xtf32(s[mt][n], a[mt], b0, b1);
          }
        }
      },
      [&](int kt) {
        mma::mask_scores<Causal>(s, kt * kBc, row0, qrow0, seq);
        softmax.tile(s, scale_log2, acc);
      },
      [&](int) {
        // O += P V, 8 keys at a time: the scores' n-tile kk is the A fragment with the k-pair
        // (t, t + 4) as keys (2t, 2t + 1), so V's rows 2t and 2t + 1 are the B fragment's.
#pragma unroll
        for (int kk = 0; kk < NT; ++kk) {
          mma::Split a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            a[mt][0] = mma::split_tf32(s[mt][kk][0]), a[mt][1] = mma::split_tf32(s[mt][kk][2]);
            a[mt][2] = mma::split_tf32(s[mt][kk][1]), a[mt][3] = mma::split_tf32(s[mt][kk][3]);
          }
          const float* vr = vs + (8 * kk + 2 * t) * kV + g;
#pragma unroll
          for (int dn = 0; dn < D / 8; ++dn) {
            const mma::Split b0 = mma::split_tf32(vr[8 * dn]), b1 = mma::split_tf32(vr[kV + 8 * dn]);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma::mma_3xtf32(acc[mt][dn], a[mt], b0, b1);
          }
        }
      });
  softmax.write(acc, o, lse + std::size_t(blockIdx.y) * seq, qrow0, seq);
}

}  // namespace

LAB_VARIANT_STEP(Attention, 3, "fused fp32 on tensor cores: 3xTF32 mma.sync (fp32 split into two tf32), fp32 accuracy",
                 .precision = "3xtf32", .writes = {"lse"}) {
  const attn::Dims& a = p.dims;
  flash::dispatch(a.d, a.causal, [&](auto dc, auto causal) {
    constexpr int D = decltype(dc)::value;
    auto kernel = flash_forward_3xtf32<D, decltype(causal)::value>;
    constexpr int bytes = Config<D>::kSmemBytes;
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const dim3 grid((a.seq + Config<D>::kBr - 1) / Config<D>::kBr, a.bh());
    kernel<<<grid, Config<D>::kThreads, bytes, stream>>>(p.q.data(), p.k.data(), p.v.data(), p.o.data(),
                                                         p.lse.data(), a.seq, a.scale() * flash::kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}
