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
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused_tc
#include "attention.cuh"
#include "flash_tiles.cuh"
#include "mma_tiles.cuh"

namespace {

constexpr int kRows = 64;  // keys a block, queries a tile
constexpr int kWarps = 4, kThreads = 32 * kWarps;

template <int D>
struct Shared {
  uint4 k[kRows * D / 8], v[kRows * D / 8];        // this block's keys
  uint4 q[2][kRows * D / 8], dout[2][kRows * D / 8];  // the query tile, two buffers
  uint4 ds[kRows * kRows / 8];                       // dS^T of the tile, bf16, [key][query]
  float lse[2][kRows], delta[2][kRows];
};

template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads)
    flash_backward_tc(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                      const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ dout,
                      const float* __restrict__ lse, const float* __restrict__ delta, float* __restrict__ dq,
                      float* __restrict__ dk, float* __restrict__ dv, int seq, float scale, float scale_log2) {
  using L = mma::Layout<D>;
  using L64 = mma::Layout<kRows>;
  extern __shared__ uint4 smem[];
  Shared<D>& sh = *reinterpret_cast<Shared<D>*>(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int key0 = int(blockIdx.x) * kRows;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D, head_rows = std::size_t(blockIdx.y) * seq;
  q += head, k += head, v += head, dout += head, dq += head, dk += head, dv += head;
  lse += head_rows, delta += head_rows;

  const int tiles = (seq + kRows - 1) / kRows, first = Causal ? int(blockIdx.x) : 0;
  auto load_rows = [&](int qt, int b) {  // the query tile's lse (log2 units) and delta, plain loads
    if (threadIdx.x < kRows) {
      const int r = qt * kRows + threadIdx.x;
      sh.lse[b][threadIdx.x] = r < seq ? lse[r] * flash::kLog2e : 0.f;
      sh.delta[b][threadIdx.x] = r < seq ? delta[r] : 0.f;
    }
  };
  mma::load_tile_async<kRows, D, kThreads>(sh.k, k, key0, seq);
  mma::load_tile_async<kRows, D, kThreads>(sh.v, v, key0, seq);
  mma::load_tile_async<kRows, D, kThreads>(sh.q[0], q, first * kRows, seq);
  mma::load_tile_async<kRows, D, kThreads>(sh.dout[0], dout, first * kRows, seq);
  mma::cp_async_commit();
  load_rows(first, 0);

  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};
  const int wkey = 16 * warp;           // the warp's first key in the block
  const int krow0 = key0 + wkey + g;    // this lane's keys: krow0 and krow0 + 8

  for (int qt = first; qt < tiles; ++qt) {
    const int b = (qt - first) & 1, row0 = qt * kRows;
    mma::cp_async_wait<0>();
    __syncthreads();  // tile qt has landed; every warp is done with tile qt - 1 (buffers and dS)
    if (qt + 1 < tiles) {
      mma::load_tile_async<kRows, D, kThreads>(sh.q[b ^ 1], q, row0 + kRows, seq);
      mma::load_tile_async<kRows, D, kThreads>(sh.dout[b ^ 1], dout, row0 + kRows, seq);
      load_rows(qt + 1, b ^ 1);
    }
    mma::cp_async_commit();
    const uint4* qs = sh.q[b];
    const uint4* dos = sh.dout[b];

    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys and the tile's 64 queries.
    float s[8][4] = {}, dp[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t ka[4], va[4];
      mma::ldmatrix_x4(ka, sh.k + L::offset(wkey + lane % 16, 2 * kk + lane / 16));
      mma::ldmatrix_x4(va, sh.v + L::offset(wkey + lane % 16, 2 * kk + lane / 16));
#pragma unroll
      for (int nn = 0; nn < 4; ++nn) {
        std::uint32_t qb[4], db[4];
        const int row = 16 * nn + lane % 8 + 8 * (lane / 16), chunk = 2 * kk + (lane / 8) % 2;
        mma::ldmatrix_x4(qb, qs + L::offset(row, chunk));
        mma::ldmatrix_x4(db, dos + L::offset(row, chunk));
        mma::mma_bf16(s[2 * nn], ka, qb[0], qb[1]);
        mma::mma_bf16(s[2 * nn + 1], ka, qb[2], qb[3]);
        mma::mma_bf16(dp[2 * nn], va, db[0], db[1]);
        mma::mma_bf16(dp[2 * nn + 1], va, db[2], db[3]);
      }
    }
    // P^T = exp2(S^T scale log2 e - lse) and dS^T = P^T (dP^T - delta), in place; masked: a key or
    // a query past seq, a key after its query.
    const bool edge = row0 + kRows > seq || key0 + kRows > seq || (Causal && qt == int(blockIdx.x));
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 8 * n + 2 * t + (e & 1), query = row0 + c, key = krow0 + 8 * (e / 2);
        float p = mma::exp2_ftz(fmaf(s[n][e], scale_log2, -sh.lse[b][c]));
        if (edge && (query >= seq || key >= seq || (Causal && key > query))) p = 0.f;
        s[n][e] = p;
        dp[n][e] = p * (dp[n][e] - sh.delta[b][c]);
      }

    // dV += P^T dO and dK += dS^T Q: the accumulators are the A fragments, bf16 pairs.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const std::uint32_t pa[4] = {mma::pack_bf16(s[2 * kk][0], s[2 * kk][1]), mma::pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                   mma::pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   mma::pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const std::uint32_t da[4] = {mma::pack_bf16(dp[2 * kk][0], dp[2 * kk][1]),
                                   mma::pack_bf16(dp[2 * kk][2], dp[2 * kk][3]),
                                   mma::pack_bf16(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                   mma::pack_bf16(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
      // dS^T to shared memory for dQ: rows g and g + 8 of the warp's keys, this kk's 16 queries.
      uint32_t* ds = reinterpret_cast<uint32_t*>(sh.ds);
      ds[4 * L64::offset(wkey + g, 2 * kk) + t] = da[0];
      ds[4 * L64::offset(wkey + g + 8, 2 * kk) + t] = da[1];
      ds[4 * L64::offset(wkey + g, 2 * kk + 1) + t] = da[2];
      ds[4 * L64::offset(wkey + g + 8, 2 * kk + 1) + t] = da[3];
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        std::uint32_t ob[4], qb[4];
        const int row = 16 * kk + lane % 8 + 8 * ((lane / 8) % 2), chunk = 2 * dn + lane / 16;
        mma::ldmatrix_x4_trans(ob, dos + L::offset(row, chunk));
        mma::ldmatrix_x4_trans(qb, qs + L::offset(row, chunk));
        mma::mma_bf16(dv_acc[2 * dn], pa, ob[0], ob[1]);
        mma::mma_bf16(dv_acc[2 * dn + 1], pa, ob[2], ob[3]);
        mma::mma_bf16(dk_acc[2 * dn], da, qb[0], qb[1]);
        mma::mma_bf16(dk_acc[2 * dn + 1], da, qb[2], qb[3]);
      }
    }
    __syncthreads();  // dS^T complete

    // dQ for the warp's 16 queries of the tile: dS (from dS^T with ldmatrix.trans) times K.
    float dq_acc[D / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {  // 16 keys a step
      std::uint32_t a[4];
      mma::ldmatrix_x4_trans(a, sh.ds + L64::offset(16 * kk + lane % 8 + 8 * (lane / 16), 2 * warp + (lane / 8) % 2));
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        std::uint32_t kb[4];
        mma::ldmatrix_x4_trans(kb, sh.k + L::offset(16 * kk + lane % 8 + 8 * ((lane / 8) % 2), 2 * dn + lane / 16));
        mma::mma_bf16(dq_acc[2 * dn], a, kb[0], kb[1]);
        mma::mma_bf16(dq_acc[2 * dn + 1], a, kb[2], kb[3]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int query = row0 + 16 * warp + g + 8 * h;
      if (query >= seq) continue;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        mma::atomic_add2(dq + std::size_t(query) * D + 8 * n + 2 * t, dq_acc[n][2 * h] * scale,
                         dq_acc[n][2 * h + 1] * scale);
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = krow0 + 8 * h;
    if (key >= seq) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const std::size_t at = std::size_t(key) * D + 8 * n + 2 * t;
      *reinterpret_cast<float2*>(dk + at) = make_float2(dk_acc[n][2 * h] * scale, dk_acc[n][2 * h + 1] * scale);
      *reinterpret_cast<float2*>(dv + at) = make_float2(dv_acc[n][2 * h], dv_acc[n][2 * h + 1]);
    }
  }
}


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
    flash::dispatch(a.d, a.causal, [&](auto dc, auto causal) {
      constexpr int D = decltype(dc)::value;
      auto kernel = flash_backward_tc<D, decltype(causal)::value>;
      constexpr int bytes = sizeof(Shared<D>);
      LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      const dim3 grid((a.seq + kRows - 1) / kRows, a.bh());
      kernel<<<grid, kThreads, bytes, stream>>>(in16.q.data(), in16.k.data(), in16.v.data(), in16.dout.data(),
                                                saved.lse.data(), saved.delta.data(), p.dq.data(), p.dk.data(),
                                                p.dv.data(), a.seq, a.scale(), a.scale() * flash::kLog2e);
      LAB_CHECK(cudaGetLastError());
    });
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(TensorCores, 4, "fused on tensor cores: bf16 mma.sync for all five products, fp32 accumulation");
