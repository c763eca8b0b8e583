// The fused attention kernels' schedule on tensor-core fragments (the instructions themselves are
// in mma_ptx.cuh): FlashAttention-2's sweep over K/V tiles with its copy schedule, the causal and
// sequence-end mask, the online softmax on accumulator fragments, and the output's epilogue.
// The fragment layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16"): lane l holds rows
// l/4 and l/4 + 8, columns 2 (l%4) and 2 (l%4) + 1 of a 16 x 8 result.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#include "attention/kernels/mma_ptx.cuh"
#include "attention/kernels/online_softmax.cuh"

namespace mma {

// The forward's sweep over K/V tiles in FlashAttention-2's copy schedule, one shared buffer for K
// and one for V: the next K tile is copied while the softmax and P V run, the next V tile while
// the next Q K^T runs. The caller has committed two cp.async groups, Q with K tile 0, then V tile
// 0. Per tile kt: scores(kt) reads K tile kt, softmax(kt) only registers, pv(kt) V tile kt;
// load_k(kt) and load_v(kt) start the copies of tile kt.
// kAsyncProxy: the tiles are read by wgmma, through the async proxy, which a fence after each
// wait makes the copies visible to.
template <bool kAsyncProxy = false, class LoadK, class LoadV, class Scores, class SoftmaxFn, class PV>
__device__ __forceinline__ void sweep_kv(int tiles, LoadK load_k, LoadV load_v, Scores scores, SoftmaxFn softmax,
                                         PV pv) {
  auto landed = [] {
    if constexpr (kAsyncProxy) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
  };
  for (int kt = 0; kt < tiles; ++kt) {
    cp_async_wait<1>();  // K tile kt has landed (V tile kt may still be on its way)
    landed();
    scores(kt);
    __syncthreads();  // K tile kt is used up: copy K tile kt + 1
    if (kt + 1 < tiles) load_k(kt + 1);
    cp_async_commit();
    softmax(kt);
    cp_async_wait<1>();  // V tile kt has landed (only K tile kt + 1 may be in flight)
    landed();
    pv(kt);
    __syncthreads();  // V tile kt is used up: copy V tile kt + 1
    if (kt + 1 < tiles) load_v(kt + 1);
    cp_async_commit();
  }
}

// The forward kernels' softmax works on accumulator fragments. A warp owns MT m16 tiles of
// queries; a tile's scores s[mt][n] (n-th 8 keys) and its output acc[mt][n] (n-th 8 columns of d)
// are m16n8 accumulators, so a lane holds rows g and g + 8 (h = 0, 1) of each m-tile, columns 2t
// and 2t + 1, and a row spans the quad of lanes with the same g.

// -inf where a key is past seq or, causal, after the query. col0: the tile's first key; row0: the
// block's first query (the tile needs no mask when every key is before it); qrow0: this lane's
// first row (+ 16 mt + 8 h).
template <bool Causal, int MT, int NT>
__device__ __forceinline__ void mask_scores(float (&s)[MT][NT][4], int col0, int row0, int qrow0, int seq) {
  const int t = threadIdx.x % 4;
  if (col0 + 8 * NT <= seq && !(Causal && col0 + 8 * NT - 1 > row0)) return;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = col0 + 8 * n + 2 * t + (e & 1);
        if (col >= seq || (Causal && col > qrow0 + 16 * mt + 8 * (e / 2))) s[mt][n][e] = -INFINITY;
      }
}

// The MUFU's 2^x (online_softmax.cuh).
using online_softmax::exp2_ftz;

// 16-bit rows stored 16 bytes a lane. A row of an m16n8 accumulator is held by a quad of lanes,
// lane t (t = lane % 4) with columns 8 n + 2 t and + 1 of every n: stored as they lie, a pair (4
// bytes, half a 32-byte sector of the quad's) a store. quad_transpose trades a quad's 4 x 4 words
// (w0..w3: columns 8 j + 2 t, + 1, j = 0..3) so that lane t leaves with columns 8 t .. 8 t + 7, its
// eight consecutive columns: two rounds, a lane's half of the words swapped with lane t ^ 2 (the 2 x
// 2 blocks), then with lane t ^ 1 (the words inside them), four shuffles. Every lane of the warp
// calls it.
__device__ __forceinline__ void quad_transpose(std::uint32_t& w0, std::uint32_t& w1, std::uint32_t& w2,
                                               std::uint32_t& w3, int t) {
  const bool hi = t & 2, odd = t & 1;
  std::uint32_t x = __shfl_xor_sync(~0u, hi ? w0 : w2, 2), y = __shfl_xor_sync(~0u, hi ? w1 : w3, 2);
  if (hi) w0 = x, w1 = y;
  else w2 = x, w3 = y;
  x = __shfl_xor_sync(~0u, odd ? w0 : w1, 1), y = __shfl_xor_sync(~0u, odd ? w2 : w3, 1);
  if (odd) w0 = x, w2 = y;
  else w1 = x, w3 = y;
}
// Whether rows of ld elements from `first` (T, 16-bit) take store16_row: whole rows of the kernel's
// `width` columns (no padding left out), each 16-byte aligned.
template <class T>
__device__ __forceinline__ bool whole_rows16(const T* first, std::size_t ld, int cols, int width) {
  return cols == width && ld % 8 == 0 && reinterpret_cast<std::uintptr_t>(first) % 16 == 0;
}
// A row's 8 DN columns from the quad's fragments, rounded to T (bf16 or fp16; nearest, even) and
// stored at r, 16 bytes a lane after quad_transpose (a quarter of the pairs' stores, whole sectors).
// pair(n): this lane's two values of its n-th pair. Every lane of the warp calls it (shuffles);
// `store` false (a row past seq) stores nothing.
template <int DN, class T, class Pair>
__device__ __forceinline__ void store16_row(T* r, bool store, Pair pair) {
  static_assert(DN % 4 == 0, "whole 32-column groups");
  const int t = threadIdx.x % 4;
  std::uint32_t w[DN];
#pragma unroll
  for (int n = 0; n < DN; ++n) {
    const float2 v = pair(n);
    w[n] = pack16<T>(v.x, v.y);
  }
#pragma unroll
  for (int g = 0; g < DN / 4; ++g) quad_transpose(w[4 * g], w[4 * g + 1], w[4 * g + 2], w[4 * g + 3], t);
  if (!store) return;
#pragma unroll
  for (int g = 0; g < DN / 4; ++g)
    *reinterpret_cast<uint4*>(r + 32 * g + 8 * t) = make_uint4(w[4 * g], w[4 * g + 1], w[4 * g + 2], w[4 * g + 3]);
}

// The online softmax's state for a warp's MT m16 tiles of queries: each row's running max m (in
// units of log2, that is, of s scale log2 e) and this lane's share l of its running sum (the quad's
// shares are added by write). Rows are (mt, h): this lane's rows g + 16 mt + 8 h.
template <int MT>
struct Softmax {
  float m[MT][2], l[MT][2];

  __device__ __forceinline__ Softmax() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
  }

  // One tile of raw scores s = q.k taken in: they become exp2(s scale log2 e - m), one FFMA and one
  // MUFU each, and the output is rescaled by exp2(m_old - m_new). Once the max has settled, most
  // tiles change no row's max in the whole warp, and the rescale (MT d / 2 multiplies a lane) is
  // skipped.
  template <int NT, int DN>
  __device__ __forceinline__ void tile(float (&s)[MT][NT][4], float scale_log2, float (&acc)[MT][DN][4]) {
    float alpha[MT][2];
    if (exponentiate(s, scale_log2, alpha)) rescale(acc, alpha);
  }

  // tile() in two halves, for a schedule whose products into the output are still running while
  // the scores are exponentiated (FlashAttention-3's overlap): the first takes the scores in and
  // returns whether any row of the warp needs its output rescaled by alpha; the second rescales.
  template <int NT>
  __device__ __forceinline__ bool exponentiate(float (&s)[MT][NT][4], float scale_log2, float (&alpha)[MT][2]) {
    bool rescale = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
        const online_softmax::Max next =
            online_softmax::new_max<online_softmax::Exp2Ftz>(m[mt][h], mx * scale_log2);
        const float m_new = next.m;
        alpha[mt][h] = next.alpha;
        rescale |= m_new != m[mt][h];
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          s[mt][n][2 * h] = exp2_ftz(fmaf(s[mt][n][2 * h], scale_log2, -m_new));
          s[mt][n][2 * h + 1] = exp2_ftz(fmaf(s[mt][n][2 * h + 1], scale_log2, -m_new));
          sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
        }
        l[mt][h] = online_softmax::running_sum(l[mt][h], alpha[mt][h], sum);
        m[mt][h] = m_new;
      }
    return __any_sync(~0u, rescale);
  }
  template <int DN>
  __device__ __forceinline__ static void rescale(float (&acc)[MT][DN][4], const float (&alpha)[MT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < DN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][n][e] *= alpha[mt][e / 2];
  }

  // O = acc / l and lse = (m + log2 l) / log2 e for this lane's rows below seq; o and lse point at
  // the head's first row.
  template <int DN>
  __device__ __forceinline__ void write(const float (&acc)[MT][DN][4], float* __restrict__ o, float* __restrict__ lse,
                                        int qrow0, int seq) const {
    finish(acc, lse, qrow0, seq, [&](int row, int col, float a, float b) {
      *reinterpret_cast<float2*>(o + std::size_t(row) * (8 * DN) + col) = make_float2(a, b);
    });
  }
  // write() into 16-bit rows (T: bf16 or fp16) of ld elements, row r at o + r ld, its first `cols`
  // columns alone (a head narrower than the kernel's width is padded with zeros: the rest is that
  // padding): the GPT-2 step's merged attention output, which its next product reads, and the
  // package's O in SDPA's layout. Whole rows, 16-byte aligned, are stored 16 bytes a lane
  // (store16_row): a quarter of the store instructions, each writing whole 32-byte sectors, where a
  // lane's pairs wrote half a sector each (under ncu at (4, 12, 1024, 64) on the H200, session 62,
  // the package's forward kernel took 39.0 us this way, 42.3 with the pairs). Elsewhere a pair at
  // a time (store16_pair).
  template <int DN, class T>
  __device__ __forceinline__ void write_rows(const float (&acc)[MT][DN][4], T* __restrict__ o,
                                             std::size_t ld, int cols, float* __restrict__ lse, int qrow0,
                                             int seq) const {
    if constexpr (DN % 4 == 0) {
      if (whole_rows16(o, ld, cols, 8 * DN)) {
        finish_rows(lse, qrow0, seq, [&](int mt, int h, int row, float inv) {
          store16_row<DN>(o + std::size_t(row) * ld, row < seq,
                          [&](int n) { return make_float2(acc[mt][n][2 * h] * inv, acc[mt][n][2 * h + 1] * inv); });
        });
        return;
      }
    }
    finish(acc, lse, qrow0, seq, [&](int row, int col, float a, float b) {
      mma::store16_pair(o + std::size_t(row) * ld + col, col, cols, a, b);
    });
  }

 private:
  // Each of this lane's rows below seq: its lse, and store(row, col, value, next value) for its
  // column pairs of acc / l.
  template <int DN, class Store>
  __device__ __forceinline__ void finish(const float (&acc)[MT][DN][4], float* __restrict__ lse, int qrow0, int seq,
                                         Store store) const {
    const int t = threadIdx.x % 4;
    finish_rows(lse, qrow0, seq, [&](int mt, int h, int row, float inv) {
      if (row >= seq) return;
#pragma unroll
      for (int n = 0; n < DN; ++n) store(row, 8 * n + 2 * t, acc[mt][n][2 * h] * inv, acc[mt][n][2 * h + 1] * inv);
    });
  }
  // Each of this lane's rows (m-tile mt, half h): its lse where the row is below seq, and
  // row_fn(mt, h, row, 1 / l) for every row, below seq or not, so that the quad's four lanes all
  // reach a shuffle in it (the row is the quad's: it checks row < seq before storing).
  template <class RowFn>
  __device__ __forceinline__ void finish_rows(float* __restrict__ lse, int qrow0, int seq, RowFn row_fn) const {
    constexpr float kLog2e = 1.4426950408889634f;
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = l[mt][h];
        sum += __shfl_xor_sync(~0u, sum, 1);
        sum += __shfl_xor_sync(~0u, sum, 2);
        const int row = qrow0 + 16 * mt + 8 * h;
        row_fn(mt, h, row, 1.f / sum);
        if (t == 0 && row < seq) lse[row] = (m[mt][h] + log2f(sum)) / kLog2e;
      }
  }
};

}  // namespace mma
