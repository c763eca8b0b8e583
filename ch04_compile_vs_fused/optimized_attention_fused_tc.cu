// Fused attention forward on tensor cores: the fused variant's algorithm (online softmax over
// K/V tiles, no seq^2 tensor) with bf16 inputs, fp32 accumulation and the two products on
// mma.sync m16n8k16 (FlashAttention-2's arrangement). A block of 4 warps owns 64 queries, a warp
// 16 of them, so the softmax of a row never leaves its warp: the scores of a 16 x 64 tile live in
// the accumulator registers (32 a thread), their row max and sum need two shuffles across a quad
// of lanes, and the probabilities are already laid out as the A operand of P V, so P goes from
// accumulators to the next mma without touching shared memory. Q's fragments stay in registers
// for the whole block; K and V tiles arrive through cp.async into two buffers, the next tile's
// copy running under this tile's arithmetic. Inputs are bf16 copies of Q, K, V (made untimed, as a
// bf16 model holds them); the output O and lse are fp32. Tolerance: bf16 (inputs and P rounded to
// 8 bits of mantissa).
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_tc
#include "attention.cuh"
#include "flash_tiles.cuh"
#include "mma_tiles.cuh"

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;

// The block's shape: MT m16 tiles of queries a warp (so a K or V fragment loaded from shared
// memory feeds MT mma instructions: with one, shared memory bandwidth caps the tensor cores near
// half their rate), 16 MT kWarps queries a block, Bc keys a tile. d = 128 takes 32 keys a tile so
// that the O accumulators (MT d/2 a lane), Q's fragments and the scores fit in 255 registers.
template <int D>
struct Config {
  static constexpr int MT = 2;
  static constexpr int kBr = 16 * MT * kWarps;
  static constexpr int kBc = D == 128 ? 32 : 64;
  static constexpr int kSmemBytes = (kBr + 4 * kBc) * D * 2;  // Q, two K and two V tiles, bf16
};

template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads)
    flash_forward_tc(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                     const __nv_bfloat16* __restrict__ v, float* __restrict__ o, float* __restrict__ lse, int seq,
                     float scale_log2) {
  using L = mma::Layout<D>;
  using C = Config<D>;
  constexpr int MT = C::MT, kBr = C::kBr, kBc = C::kBc, NT = kBc / 8;
  extern __shared__ uint4 smem[];
  uint4* qs = smem;  // Q, then two K tiles, then two V tiles
  auto ks = [&](int b) { return smem + (kBr + b * kBc) * (D / 8); };
  auto vs = [&](int b) { return smem + (kBr + (2 + b) * kBc) * (D / 8); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = tile * kBr;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D;
  q += head, k += head, v += head, o += head;

  mma::load_tile_async<kBr, D, kThreads>(qs, q, row0, seq);
  mma::load_tile_async<kBc, D, kThreads>(ks(0), k, 0, seq);
  mma::load_tile_async<kBc, D, kThreads>(vs(0), v, 0, seq);
  mma::cp_async_commit();

  std::uint32_t qf[MT][D / 16][4];
  float acc[MT][D / 8][4] = {};
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
  const int wrow = 16 * MT * warp;          // the warp's first row in the block
  const int qrow0 = row0 + wrow + g;        // this lane's rows: qrow0 + 16 mt + 8 h

  const int last = Causal ? min(seq, row0 + kBr) : seq;  // keys [0, last) matter
  const int tiles = (last + kBc - 1) / kBc;
  for (int kt = 0; kt < tiles; ++kt) {
    mma::cp_async_wait<0>();
    __syncthreads();  // tile kt has landed; every warp is done with tile kt - 1's buffers
    if (kt == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          mma::ldmatrix_x4(qf[mt][kk], qs + L::offset(wrow + 16 * mt + lane % 16, 2 * kk + lane / 16));
    }
    if (kt + 1 < tiles) {
      mma::load_tile_async<kBc, D, kThreads>(ks((kt + 1) & 1), k, (kt + 1) * kBc, seq);
      mma::load_tile_async<kBc, D, kThreads>(vs((kt + 1) & 1), v, (kt + 1) * kBc, seq);
    }
    mma::cp_async_commit();
    const uint4* kb = ks(kt & 1);
    const uint4* vb = vs(kt & 1);

    // S = Q K^T for the warp's 16 MT rows and the tile's kBc keys: NT n-tiles of 8 keys. Each K
    // fragment pair feeds MT mma instructions.
    float s[MT][NT][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int nn = 0; nn < NT / 2; ++nn) {
        std::uint32_t b[4];
        mma::ldmatrix_x4(b, kb + L::offset(16 * nn + lane % 8 + 8 * (lane / 16), 2 * kk + (lane / 8) % 2));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma::mma_bf16(s[mt][2 * nn], qf[mt][kk], b[0], b[1]);
          mma::mma_bf16(s[mt][2 * nn + 1], qf[mt][kk], b[2], b[3]);
        }
      }
    const int col0 = kt * kBc;
    const bool edge = col0 + kBc > seq || (Causal && col0 + kBc - 1 > row0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[mt][n][e] * scale_log2;
          if (edge) {
            const int col = col0 + 8 * n + 2 * t + (e & 1);
            if (col >= seq || (Causal && col > qrow0 + 16 * mt + 8 * (e / 2))) x = -INFINITY;
          }
          s[mt][n][e] = x;
        }

    // Online softmax: a lane holds rows g and g + 8 of each m-tile; a row spans a quad of lanes.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
        // Finite once the first tile is in (every row has key 0); a row whose keys in this tile
        // are all masked keeps its max, and its probabilities here are exp2(-inf) = 0.
        const float m_new = fmaxf(m[mt][h], mx);
        const float alpha = exp2f(m[mt][h] - m_new);
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          s[mt][n][2 * h] = exp2f(s[mt][n][2 * h] - m_new);
          s[mt][n][2 * h + 1] = exp2f(s[mt][n][2 * h + 1] - m_new);
          sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
        }
        l[mt][h] = l[mt][h] * alpha + sum;  // this lane's share; the quad's shares are added at the end
        m[mt][h] = m_new;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) acc[mt][n][2 * h] *= alpha, acc[mt][n][2 * h + 1] *= alpha;
      }

    // O += P V: P's accumulators are the A fragments of a 16-key step, as bf16 pairs; each V
    // fragment pair feeds MT mma instructions.
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = mma::pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = mma::pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = mma::pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = mma::pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        std::uint32_t b[4];
        mma::ldmatrix_x4_trans(b, vb + L::offset(16 * kk + lane % 8 + 8 * ((lane / 8) % 2), 2 * dn + lane / 16));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma::mma_bf16(acc[mt][2 * dn], a[mt], b[0], b[1]);
          mma::mma_bf16(acc[mt][2 * dn + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(~0u, sum, 1);
      sum += __shfl_xor_sync(~0u, sum, 2);
      const int row = qrow0 + 16 * mt + 8 * h;
      if (row >= seq) continue;
      const float inv = 1.f / sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<float2*>(o + std::size_t(row) * D + 8 * n + 2 * t) =
            make_float2(acc[mt][n][2 * h] * inv, acc[mt][n][2 * h + 1] * inv);
      if (t == 0) lse[std::size_t(blockIdx.y) * seq + row] = (m[mt][h] + log2f(sum)) / flash::kLog2e;
    }
}

}  // namespace

LAB_VARIANT_STEP(Attention, 3, "fused on tensor cores: bf16 mma.sync, fp32 accumulation, P kept in registers") {
  const attn::Dims& a = p.dims;
  p.bf16_inputs(stream);
  p.tolerance_override = lab::Tolerance::bf16();
  flash::dispatch(a.d, a.causal, [&](auto dc, auto causal) {
    constexpr int D = decltype(dc)::value;
    auto kernel = flash_forward_tc<D, decltype(causal)::value>;
    constexpr int bytes = Config<D>::kSmemBytes;
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const dim3 grid((a.seq + Config<D>::kBr - 1) / Config<D>::kBr, a.bh());
    kernel<<<grid, kThreads, bytes, stream>>>(p.q16.data(), p.k16.data(), p.v16.data(), p.o.data(), p.lse.data(),
                                              a.seq, a.scale() * flash::kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
  p.wrote_lse = true;
}
