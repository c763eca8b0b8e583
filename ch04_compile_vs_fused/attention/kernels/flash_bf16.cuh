// The fused attention kernels on tensor cores in 16 bits, forward and backward: bf16 (or fp16) Q,
// K, V (and dO), fp32 accumulation, fp32 outputs (O, lse; dQ, dK, dV), every product on mma.sync
// m16n8k16 (FlashAttention-2's arrangement). Shared by the chapter's tensor-core variants
// (optimized_attention_fused_tc.cu, optimized_attention_backward_fused_tc.cu, which teach them in
// bf16) and the Python bridge (python/), which runs them on PyTorch's bf16 and fp16 tensors. The
// element type T is __nv_bfloat16 or __half: the same fragments and schedule, only the mma
// instruction and the rounding of P and dS to T differ (mma::mma16, mma::pack16). Q, K, V, O, dO,
// dQ, dK, dV: bh heads of seq x D, row-major, contiguous; lse, delta: bh x seq. D is 16, 32, 64, 128
// or 256 (the chapter's attention topic takes up to 128; the Python bridge's 16-bit attention all
// five: at 256 the forward's warps own one m-tile each and the backward's blocks half of the
// gradients' columns, below).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/kernels/flash_tiles.cuh"
#include "lab/check.hpp"
#include "attention/kernels/mma_tiles.cuh"

namespace flashbf16 {

using flash::kLog2e;

// ---- forward: a block of 4 warps owns 128 queries (the variant file tells the schedule) ----
namespace fwd {

constexpr int kWarps = 4, kThreads = 32 * kWarps;

// The block's shape: MT m16 tiles of queries a warp (so a K or V fragment loaded from shared
// memory feeds MT mma instructions: with one, shared memory bandwidth caps the tensor cores near
// half their rate), 16 MT kWarps queries a block, 64 keys a tile. Up to d = 64 Q's fragments stay
// in registers for the whole block; at d = 128 the O accumulators alone take MT d / 2 = 128
// registers a lane, and Q's fragments are read from shared memory at every step instead (one
// ldmatrix per m-tile and 16 of d, feeding NT mma instructions), which leaves room for 64 keys.
// At d = 256 two m-tiles would need 256 registers a lane for O alone (a lane has 255): a warp owns
// one, 64 queries a block, and each K and V fragment feeds one mma instruction.
template <int D>
struct Config {
  static constexpr int MT = D > 128 ? 1 : 2;
  static constexpr int kBr = 16 * MT * kWarps;
  static constexpr int kBc = 64;
  static constexpr bool kQInRegisters = D < 128;
  static constexpr int kSmemBytes = (kBr + 2 * kBc) * D * 2;  // Q, the K tile, the V tile, 16-bit
};

template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kThreads)
    flash_forward_tc(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, float* __restrict__ o,
                     float* __restrict__ lse, int seq, float scale_log2) {
  using L = mma::Layout<D>;
  using C = Config<D>;
  constexpr int MT = C::MT, kBr = C::kBr, kBc = C::kBc, NT = kBc / 8;
  extern __shared__ uint4 smem[];
  uint4* qs = smem;  // Q, the K tile, the V tile
  uint4* ks = qs + kBr * (D / 8);
  uint4* vs = ks + kBc * (D / 8);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = tile * kBr;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D;
  q += head, k += head, v += head, o += head;

  mma::load_tile_async<kBr, D, kThreads>(qs, q, row0, seq);
  mma::load_tile_async<kBc, D, kThreads>(ks, k, 0, seq);
  mma::cp_async_commit();  // copy groups: Q and K tile 0; V tile 0; then per tile K kt + 1, V kt + 1
  mma::load_tile_async<kBc, D, kThreads>(vs, v, 0, seq);
  mma::cp_async_commit();

  std::uint32_t qf[MT][C::kQInRegisters ? D / 16 : 1][4];
  float acc[MT][D / 8][4] = {};
  mma::Softmax<MT> softmax;  // each row's running max and sum
  const int wrow = 16 * MT * warp;          // the warp's first row in the block
  const int qrow0 = row0 + wrow + g;        // this lane's rows: qrow0 + 16 mt + 8 h

  const int last = Causal ? min(seq, row0 + kBr) : seq;  // keys [0, last) matter
  const int tiles = (last + kBc - 1) / kBc;
  float s[MT][NT][4];  // the tile's scores, then its probabilities
  mma::sweep_kv(
      tiles, [&](int kt) { mma::load_tile_async<kBc, D, kThreads>(ks, k, kt * kBc, seq); },
      [&](int kt) { mma::load_tile_async<kBc, D, kThreads>(vs, v, kt * kBc, seq); },
      [&](int kt) {
        if constexpr (C::kQInRegisters) {
          if (kt == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int kk = 0; kk < D / 16; ++kk)
                mma::ldmatrix_x4(qf[mt][kk], qs + L::offset(wrow + 16 * mt + lane % 16, 2 * kk + lane / 16));
          }
        }

        // S = Q K^T for the warp's 16 MT rows and the tile's kBc keys: NT n-tiles of 8 keys. Each K
        // fragment pair feeds MT mma instructions.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n = 0; n < NT; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          std::uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if constexpr (C::kQInRegisters) {
#pragma unroll
              for (int i = 0; i < 4; ++i) a[mt][i] = qf[mt][kk][i];
            } else {
              mma::ldmatrix_x4(a[mt], qs + L::offset(wrow + 16 * mt + lane % 16, 2 * kk + lane / 16));
            }
          }
#pragma unroll
          for (int nn = 0; nn < NT / 2; ++nn) {
            std::uint32_t b[4];
            mma::ldmatrix_x4(b, ks + L::offset(16 * nn + lane % 8 + 8 * (lane / 16), 2 * kk + (lane / 8) % 2));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma::mma16<T>(s[mt][2 * nn], a[mt], b[0], b[1]);
              mma::mma16<T>(s[mt][2 * nn + 1], a[mt], b[2], b[3]);
            }
          }
        }
      },
      [&](int kt) {
        mma::mask_scores<Causal>(s, kt * kBc, row0, qrow0, seq);
        softmax.tile(s, scale_log2, acc);
      },
      [&](int) {
        // O += P V: P's accumulators are the A fragments of a 16-key step, as pairs of T; each V
        // fragment pair feeds MT mma instructions.
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk) {
          std::uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            a[mt][0] = mma::pack16<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            a[mt][1] = mma::pack16<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            a[mt][2] = mma::pack16<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            a[mt][3] = mma::pack16<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
          }
#pragma unroll
          for (int dn = 0; dn < D / 16; ++dn) {
            std::uint32_t b[4];
            mma::ldmatrix_x4_trans(b, vs + L::offset(16 * kk + lane % 8 + 8 * ((lane / 8) % 2), 2 * dn + lane / 16));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma::mma16<T>(acc[mt][2 * dn], a[mt], b[0], b[1]);
              mma::mma16<T>(acc[mt][2 * dn + 1], a[mt], b[2], b[3]);
            }
          }
        }
      });
  softmax.write(acc, o, lse + std::size_t(blockIdx.y) * seq, qrow0, seq);
}

}  // namespace fwd

// ---- backward: a block of 4 warps owns 64 keys and streams 64-query tiles ----
namespace bwd {

constexpr int kRows = 64;  // keys a block, queries a tile
constexpr int kWarps = 4, kThreads = 32 * kWarps;

// The columns of dK, dV and dQ a block computes: all D up to 128. At D = 256 a lane's dK and dV
// accumulators for every column would take 256 registers (a lane has 255), so two blocks share a
// key block, the grid's z choosing which half of the columns each accumulates (kOutCols), and
// computes S^T and dP^T over all of D: those two products are done twice, so the five products'
// 5 units of work become 7 (each block S^T and dP^T whole, and its half of dV, dK and dQ).
template <int D>
inline constexpr int kOutCols = D > 128 ? 128 : D;

template <int D>
struct Shared {
  uint4 k[kRows * D / 8], v[kRows * D / 8];        // this block's keys
  uint4 q[2][kRows * D / 8], dout[2][kRows * D / 8];  // the query tile, two buffers
  uint4 ds[kRows * kRows / 8];                       // dS^T of the tile, 16-bit, [key][query]
  float lse[2][kRows], delta[2][kRows];
};

template <class T, int D, bool Causal>
__global__ void __launch_bounds__(kThreads)
    flash_backward_tc(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                      const T* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta, float* __restrict__ dq,
                      float* __restrict__ dk, float* __restrict__ dv, int seq, float scale, float scale_log2) {
  using L = mma::Layout<D>;
  using L64 = mma::Layout<kRows>;
  constexpr int DO = kOutCols<D>;      // the gradients' columns this block computes,
  const int c0 = DO * int(blockIdx.z);  // from column c0 (z is 0 but at D = 256)
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

  float dk_acc[DO / 8][4] = {}, dv_acc[DO / 8][4] = {};
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
        mma::mma16<T>(s[2 * nn], ka, qb[0], qb[1]);
        mma::mma16<T>(s[2 * nn + 1], ka, qb[2], qb[3]);
        mma::mma16<T>(dp[2 * nn], va, db[0], db[1]);
        mma::mma16<T>(dp[2 * nn + 1], va, db[2], db[3]);
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

    // dV += P^T dO and dK += dS^T Q: the accumulators are the A fragments, pairs of T.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const std::uint32_t pa[4] = {mma::pack16<T>(s[2 * kk][0], s[2 * kk][1]), mma::pack16<T>(s[2 * kk][2], s[2 * kk][3]),
                                   mma::pack16<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   mma::pack16<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const std::uint32_t da[4] = {mma::pack16<T>(dp[2 * kk][0], dp[2 * kk][1]),
                                   mma::pack16<T>(dp[2 * kk][2], dp[2 * kk][3]),
                                   mma::pack16<T>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                   mma::pack16<T>(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
      // dS^T to shared memory for dQ: rows g and g + 8 of the warp's keys, this kk's 16 queries.
      uint32_t* ds = reinterpret_cast<uint32_t*>(sh.ds);
      ds[4 * L64::offset(wkey + g, 2 * kk) + t] = da[0];
      ds[4 * L64::offset(wkey + g + 8, 2 * kk) + t] = da[1];
      ds[4 * L64::offset(wkey + g, 2 * kk + 1) + t] = da[2];
      ds[4 * L64::offset(wkey + g + 8, 2 * kk + 1) + t] = da[3];
#pragma unroll
      for (int dn = 0; dn < DO / 16; ++dn) {
        std::uint32_t ob[4], qb[4];
        const int row = 16 * kk + lane % 8 + 8 * ((lane / 8) % 2), chunk = c0 / 8 + 2 * dn + lane / 16;
        mma::ldmatrix_x4_trans(ob, dos + L::offset(row, chunk));
        mma::ldmatrix_x4_trans(qb, qs + L::offset(row, chunk));
        mma::mma16<T>(dv_acc[2 * dn], pa, ob[0], ob[1]);
        mma::mma16<T>(dv_acc[2 * dn + 1], pa, ob[2], ob[3]);
        mma::mma16<T>(dk_acc[2 * dn], da, qb[0], qb[1]);
        mma::mma16<T>(dk_acc[2 * dn + 1], da, qb[2], qb[3]);
      }
    }
    __syncthreads();  // dS^T complete

    // dQ for the warp's 16 queries of the tile: dS (from dS^T with ldmatrix.trans) times K.
    float dq_acc[DO / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {  // 16 keys a step
      std::uint32_t a[4];
      mma::ldmatrix_x4_trans(a, sh.ds + L64::offset(16 * kk + lane % 8 + 8 * (lane / 16), 2 * warp + (lane / 8) % 2));
#pragma unroll
      for (int dn = 0; dn < DO / 16; ++dn) {
        std::uint32_t kb[4];
        const int row = 16 * kk + lane % 8 + 8 * ((lane / 8) % 2), chunk = c0 / 8 + 2 * dn + lane / 16;
        mma::ldmatrix_x4_trans(kb, sh.k + L::offset(row, chunk));
        mma::mma16<T>(dq_acc[2 * dn], a, kb[0], kb[1]);
        mma::mma16<T>(dq_acc[2 * dn + 1], a, kb[2], kb[3]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int query = row0 + 16 * warp + g + 8 * h;
      if (query >= seq) continue;
#pragma unroll
      for (int n = 0; n < DO / 8; ++n) {
        mma::atomic_add2(dq + std::size_t(query) * D + c0 + 8 * n + 2 * t, dq_acc[n][2 * h] * scale,
                         dq_acc[n][2 * h + 1] * scale);
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = krow0 + 8 * h;
    if (key >= seq) continue;
#pragma unroll
    for (int n = 0; n < DO / 8; ++n) {
      const std::size_t at = std::size_t(key) * D + c0 + 8 * n + 2 * t;
      *reinterpret_cast<float2*>(dk + at) = make_float2(dk_acc[n][2 * h] * scale, dk_acc[n][2 * h + 1] * scale);
      *reinterpret_cast<float2*>(dv + at) = make_float2(dv_acc[n][2 * h], dv_acc[n][2 * h + 1]);
    }
  }
}

}  // namespace bwd

// The widest head these kernels take, where a caller compiles them for it (MaxD below): the Python
// package and the wide test do; the chapter's variants stop at 128 (MaxD's default).
inline constexpr int kWidestHead = 256;

// The forward over bh heads: O, and lse (natural log) per row. T: __nv_bfloat16 or __half. MaxD:
// the widest head a caller runs, 128 or kWidestHead (flash::dispatch; the head-256 kernels are
// compiled only where a caller asks for them: the Python package and the wide test).
template <class T, int MaxD = 128>
inline void forward(const T* q, const T* k, const T* v, float* o, float* lse, int bh, int seq, int d, bool causal,
                    float scale, cudaStream_t stream) {
  flash::dispatch<MaxD>(d, causal, [&](auto dc, auto c) {
    constexpr int D = decltype(dc)::value;
    using C = fwd::Config<D>;
    auto kernel = fwd::flash_forward_tc<T, D, decltype(c)::value>;
    constexpr int bytes = C::kSmemBytes;
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const dim3 grid((seq + C::kBr - 1) / C::kBr, bh);
    kernel<<<grid, fwd::kThreads, bytes, stream>>>(q, k, v, o, lse, seq, scale * kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}

// The backward over bh heads, from the forward's lse and delta = rowsum(dO o O): dK, dV written,
// dQ added to (zero it first: every key block adds its share atomically). MaxD as the forward's.
template <class T, int MaxD = 128>
inline void backward(const T* q, const T* k, const T* v, const T* dout, const float* lse, const float* delta, float* dq,
                     float* dk, float* dv, int bh, int seq, int d, bool causal, float scale, cudaStream_t stream) {
  flash::dispatch<MaxD>(d, causal, [&](auto dc, auto c) {
    constexpr int D = decltype(dc)::value;
    auto kernel = bwd::flash_backward_tc<T, D, decltype(c)::value>;
    constexpr int bytes = sizeof(bwd::Shared<D>);  // 201 KB at D = 256
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const dim3 grid((seq + bwd::kRows - 1) / bwd::kRows, bh, D / bwd::kOutCols<D>);
    kernel<<<grid, bwd::kThreads, bytes, stream>>>(q, k, v, dout, lse, delta, dq, dk, dv, seq, scale,
                                                   scale * kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}

}  // namespace flashbf16
