// The fp32 flash attention kernels, forward and backward (the lessons: optimized_attention_fused.cu
// and optimized_attention_backward_fused.cu describe them), shared by those variants and by the
// GPT-2 step's fused variant. Q, K, V, O, dO, dQ, dK, dV: bh heads of seq x D, row-major,
// contiguous; lse, delta: bh x seq. D is 16, 32, 64 or 128.
#pragma once

#include <cmath>
#include <cstddef>

#include "attention/kernels/flash_tiles.cuh"
#include "attention/kernels/online_softmax.cuh"
#include "lab/check.hpp"

namespace flash {

template <int D>
struct ForwardShared {
  Tile<D> q, k, v;
  Tile<kRows> p;
};

template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads, 2)
    flash_forward(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                  float* __restrict__ o, float* __restrict__ lse, int seq, float scale_log2) {
  constexpr int W = D / 16;
  extern __shared__ float4 smem[];
  ForwardShared<D>& sh = *reinterpret_cast<ForwardShared<D>*>(smem);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = tile * kRows;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D;
  q += head, k += head, v += head, o += head;

  load_tile(sh.q, q, row0, seq, scale_log2);
  float m[4], l[4], acc[4][W] = {};
#pragma unroll
  for (int i = 0; i < 4; ++i) m[i] = -INFINITY, l[i] = 0.f;

  const int tiles = Causal ? tile + 1 : (seq + kRows - 1) / kRows;
  for (int kt = 0; kt < tiles; ++kt) {
    const int col0 = kt * kRows;
    __syncthreads();  // the previous tile's K, V and P are used up
    load_tile(sh.k, k, col0, seq);
    load_tile(sh.v, v, col0, seq);
    __syncthreads();

    float s[4][4] = {};
    product_nt<D>(sh.q, sh.k, ty, tx, s);  // log2-scaled scores
    if (col0 + kRows > seq || (Causal && kt == tile)) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = col0 + 4 * tx + j;
          if (col >= seq || (Causal && col > row0 + 4 * ty + i)) s[i][j] = -INFINITY;
        }
    }
    // Online softmax (online_softmax.cuh), row by row; the 16 threads of a row are 16 consecutive lanes.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
#pragma unroll
      for (int off = 8; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, off));
      const online_softmax::Max next = online_softmax::new_max<online_softmax::Exp2>(m[i], mx);
      const float m_new = next.m, alpha = next.alpha;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = exp2f(s[i][j] - m_new);
        sum += s[i][j];
      }
#pragma unroll
      for (int off = 8; off > 0; off /= 2) sum += __shfl_xor_sync(~0u, sum, off);
      l[i] = online_softmax::running_sum(l[i], alpha, sum);
      m[i] = m_new;
#pragma unroll
      for (int w = 0; w < W; ++w) acc[i][w] *= alpha;
      sh.p.st(4 * ty + i, tx, make_float4(s[i][0], s[i][1], s[i][2], s[i][3]));
    }
    __syncthreads();
    product_nn<D>(sh.p, sh.v, ty, tx, acc);  // O += P V
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = row0 + 4 * ty + i;
    if (row >= seq) continue;
    const float inv = 1.f / l[i];
#pragma unroll
    for (int w = 0; w < W; ++w) o[std::size_t(row) * D + Cols<D>::col(tx, w)] = acc[i][w] * inv;
    if (tx == 0) lse[std::size_t(blockIdx.y) * seq + row] = (m[i] + log2f(l[i])) / kLog2e;
  }
}

template <int D>
struct BackwardShared {
  Tile<D> k, v, q, dout;
  Tile<kRows> p, ds;  // P^T and dS^T: rows are keys, columns queries
  float lse[kRows], delta[kRows];
};

template <int D, bool Causal>
__global__ void __launch_bounds__(kThreads)
    flash_backward(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                   const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
                   float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv, int seq, float scale,
                   float scale_log2) {
  constexpr int W = D / 16;
  extern __shared__ float4 smem[];
  BackwardShared<D>& sh = *reinterpret_cast<BackwardShared<D>*>(smem);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int key0 = int(blockIdx.x) * kRows;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D, head_rows = std::size_t(blockIdx.y) * seq;
  q += head, k += head, v += head, dout += head, dq += head, dk += head, dv += head;
  lse += head_rows, delta += head_rows;

  load_tile(sh.k, k, key0, seq);
  load_tile(sh.v, v, key0, seq);
  float dk_acc[4][W] = {}, dv_acc[4][W] = {};

  const int tiles = (seq + kRows - 1) / kRows;
  for (int qt = Causal ? int(blockIdx.x) : 0; qt < tiles; ++qt) {
    const int row0 = qt * kRows;
    __syncthreads();  // the previous query tile is used up
    load_tile(sh.q, q, row0, seq);
    load_tile(sh.dout, dout, row0, seq);
    if (threadIdx.x < kRows) {
      const int r = row0 + threadIdx.x;
      sh.lse[threadIdx.x] = r < seq ? lse[r] * kLog2e : INFINITY;  // a row beyond seq: P = 0
      sh.delta[threadIdx.x] = r < seq ? delta[r] : 0.f;
    }
    __syncthreads();

    float p[4][4] = {}, dp[4][4] = {};
    product_nt<D>(sh.k, sh.q, ty, tx, p);      // (K Q^T)[key][query]
    product_nt<D>(sh.v, sh.dout, ty, tx, dp);  // dP^T = V dO^T
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int key = key0 + 4 * ty + i;
      float pr[4], ds[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = 4 * tx + j, query = row0 + r;
        const bool keep = key < seq && (!Causal || key <= query);
        pr[j] = keep ? exp2f(p[i][j] * scale_log2 - sh.lse[r]) : 0.f;
        ds[j] = pr[j] * (dp[i][j] - sh.delta[r]);
      }
      sh.p.st(4 * ty + i, tx, make_float4(pr[0], pr[1], pr[2], pr[3]));
      sh.ds.st(4 * ty + i, tx, make_float4(ds[0], ds[1], ds[2], ds[3]));
    }
    __syncthreads();
    product_nn<D>(sh.p, sh.dout, ty, tx, dv_acc);  // dV += P^T dO
    product_nn<D>(sh.ds, sh.q, ty, tx, dk_acc);    // dK += dS^T Q
    float dq_part[4][W] = {};
    product_tn<D>(sh.ds, sh.k, ty, tx, dq_part);  // (dS K)[query][:]
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int query = row0 + 4 * ty + i;
      if (query >= seq) continue;
#pragma unroll
      for (int w = 0; w < W; ++w) atomicAdd(dq + std::size_t(query) * D + Cols<D>::col(tx, w), dq_part[i][w] * scale);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int key = key0 + 4 * ty + i;
    if (key >= seq) continue;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const std::size_t at = std::size_t(key) * D + Cols<D>::col(tx, w);
      dk[at] = dk_acc[i][w] * scale;
      dv[at] = dv_acc[i][w];
    }
  }
}

// The forward over bh heads: O, and lse (natural log) per row.
inline void forward(const float* q, const float* k, const float* v, float* o, float* lse, int bh, int seq, int d,
                    bool causal, float scale, cudaStream_t stream) {
  dispatch(d, causal, [&](auto dc, auto c) {
    constexpr int D = decltype(dc)::value;
    auto kernel = flash_forward<D, decltype(c)::value>;
    constexpr int bytes = sizeof(ForwardShared<D>);
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const dim3 grid((seq + kRows - 1) / kRows, bh);
    kernel<<<grid, kThreads, bytes, stream>>>(q, k, v, o, lse, seq, scale * kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}

// The backward over bh heads, from the forward's lse and delta = rowsum(dO o O): dK, dV written,
// dQ added to (zero it first: every key tile adds its share atomically).
inline void backward(const float* q, const float* k, const float* v, const float* dout, const float* lse,
                     const float* delta, float* dq, float* dk, float* dv, int bh, int seq, int d, bool causal,
                     float scale, cudaStream_t stream) {
  dispatch(d, causal, [&](auto dc, auto c) {
    constexpr int D = decltype(dc)::value;
    auto kernel = flash_backward<D, decltype(c)::value>;
    constexpr int bytes = sizeof(BackwardShared<D>);
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const dim3 grid((seq + kRows - 1) / kRows, bh);
    kernel<<<grid, kThreads, bytes, stream>>>(q, k, v, dout, lse, delta, dq, dk, dv, seq, scale, scale * kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}

}  // namespace flash
