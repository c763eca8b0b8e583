// The fused attention kernels in 3xTF32, forward and backward: fp32 inputs and outputs, every
// product on the tensor cores (mma.sync m16n8k8) with each operand split into two tf32 values, at
// fp32's accuracy. Shared by the chapter's 3xTF32 variants (optimized_attention_fused_3xtf32.cu,
// optimized_attention_backward_fused_3xtf32.cu, which teach them) and the GPT-2 step that puts them
// in the model (optimized_gpt2_step_fused_tc_attention.cu). Q, K, V, O, dO, dQ, dK, dV: bh heads of
// seq x D, row-major, contiguous; lse, delta: bh x seq. D is 16, 32, 64 or 128.
//
// fp32 accuracy needs one more thing than the split. A tensor core adds each product into its
// accumulator without rounding to nearest (it aligns and truncates), so over a long sum its errors
// do not cancel: they drift one way. Measured in the GPT-2 step, whose products ran in cuBLAS's
// 3xTF32 over whole rows of up to 4096 terms: 4.3 times PyTorch fp32's allowance, and at the fp32
// step's own level once the sums were cut into chunks of 64 added in fp32 (the ch04 README). So no
// sum here stays in the tensor cores beyond one tile (at most 64 terms, 8 mma k-steps): a tile's
// P V (forward), and a query tile's share of dV and dK (backward), are made in registers of their
// own and added to the running sums with fp32 additions; dQ's share leaves by fp32 atomics.
#pragma once

#include <cmath>
#include <cstddef>

#include "attention/kernels/flash_tiles.cuh"
#include "lab/check.hpp"
#include "attention/kernels/mma_tiles.cuh"

namespace flash3x {

using flash::kLog2e;

// The block: 4 warps, each owning two m16 tiles of queries (a K or V fragment, split once, feeds
// both), so 128 queries, and kBc keys a tile. One buffer for K and one for V, in
// FlashAttention-2's schedule: the next K tile is copied while the softmax and P V run, the next V
// tile while Q K^T runs. Double buffering both would overlap no more and, at d = 128, take 138 KiB
// of shared memory: one block an SM instead of two, which measured slower (the chapter README
// gives the figure).
template <int D>
struct ForwardConfig {
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
__global__ void __launch_bounds__(ForwardConfig<D>::kThreads, ForwardConfig<D>::kMinBlocks)
    flash_forward_3xtf32(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                         float* __restrict__ o, float* __restrict__ lse, int seq, float scale_log2) {
  using C = ForwardConfig<D>;
  constexpr int MT = C::MT, kBr = C::kBr, kBc = C::kBc, NT = kBc / 8, kQK = C::kQK, kV = C::kV;
  constexpr int kThreads = C::kThreads;
  constexpr int DC = D / 8 < 4 ? D / 8 : 4;  // n-tiles of d a tile's P V is summed over at once
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
        // (t, t + 4) as keys (2t, 2t + 1), so V's rows 2t and 2t + 1 are the B fragment's. The
        // tile's sum is made in registers of its own, 32 columns at a time (the P fragments split
        // again for each 32: cheaper than the registers a whole row would take), and added to O
        // in fp32 (see the file's head).
#pragma unroll
        for (int d0 = 0; d0 < D / 8; d0 += DC) {
          float part[MT][DC][4] = {};
#pragma unroll
          for (int kk = 0; kk < NT; ++kk) {
            mma::Split a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              const float(&p)[4] = s[mt][kk];
              a[mt][0] = mma::split_tf32(p[0]), a[mt][1] = mma::split_tf32(p[2]);
              a[mt][2] = mma::split_tf32(p[1]), a[mt][3] = mma::split_tf32(p[3]);
            }
            const float* vr = vs + (8 * kk + 2 * t) * kV + 8 * d0 + g;
#pragma unroll
            for (int dn = 0; dn < DC; ++dn) {
              const mma::Split b0 = mma::split_tf32(vr[8 * dn]), b1 = mma::split_tf32(vr[kV + 8 * dn]);
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) mma::mma_3xtf32(part[mt][dn], a[mt], b0, b1);
            }
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int dn = 0; dn < DC; ++dn)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[mt][d0 + dn][e] += part[mt][dn][e];
        }
      });
  softmax.write(acc, o, lse + std::size_t(blockIdx.y) * seq, qrow0, seq);
}


// The backward: a block of 4 warps owns 64 keys, whose K and V rows stay in shared memory and
// whose dK and dV are summed in registers while the block streams 32-query tiles of Q and dO
// (cp.async, two buffers: the next tile's copy runs under this tile's arithmetic). Per tile, a
// warp computes its 16 keys' rows of S^T = K Q^T and dP^T = V dO^T, turns them in place into P^T
// and dS^T = P^T o (dP^T - delta), and feeds them straight back as the A fragments of
// dV += P^T dO and dK += dS^T Q. dQ = dS K needs dS the other way round: dS^T goes through shared
// memory, and each warp adds a 16-query, d/2-column share of the tile's dQ to device memory with
// 8-byte atomics. Every product is 3xTF32, and every sum over more than one tile leaves the tensor
// cores after a tile (at most 8 k-steps): a tile's dV and dK are made in registers of their own
// and added to the sweep's in fp32, a tile's dQ is added by the atomics. Layouts: every row of K,
// V, Q and dO is d + 4 floats apart and dS^T's kBq + 4. Products over d take their k index as it
// is (lane t's pair is (t, t + 4)); products over queries or keys take the pair as (2t, 2t + 1),
// which makes the accumulators the next product's A fragments, as in the forward. With those, no
// fragment load has a bank conflict; only the stores of dS^T have (two ways).
template <int D>
struct BackwardConfig {
  static constexpr int kWarps = 4, kThreads = 32 * kWarps;
  static constexpr int kKeys = 16 * kWarps;  // a block's keys
  static constexpr int kBq = 32;             // a tile's queries
  static constexpr int kS = D + 4;           // row stride of K, V, Q, dO
  static constexpr int kSds = kBq + 4;       // of dS^T
  static constexpr int kSmemFloats = 2 * kKeys * kS + 4 * kBq * kS + kKeys * kSds + 4 * kBq;
  static constexpr int kSmemBytes = 4 * kSmemFloats;
};

template <int D, bool Causal>
__global__ void __launch_bounds__(BackwardConfig<D>::kThreads)
    flash_backward_3xtf32(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                          const float* __restrict__ dout, const float* __restrict__ lse,
                          const float* __restrict__ delta, float* __restrict__ dq, float* __restrict__ dk,
                          float* __restrict__ dv, int seq, float scale, float scale_log2) {
  using C = BackwardConfig<D>;
  constexpr int kKeys = C::kKeys, kBq = C::kBq, kS = C::kS, kSds = C::kSds, kThreads = C::kThreads;
  constexpr int DN = D / 8, NQ = kBq / 8, DH = DN / 2;  // n-tiles of d, of a tile's queries; d's half
  extern __shared__ float4 smem[];
  float* ks = reinterpret_cast<float*>(smem);
  float* vs = ks + kKeys * kS;
  float* qs0 = vs + kKeys * kS;          // two buffers of Q, then two of dO
  float* dos0 = qs0 + 2 * kBq * kS;
  float* dst = dos0 + 2 * kBq * kS;      // dS^T: [key][query]
  float* rows = dst + kKeys * kSds;      // lse (log2 units) and delta of a tile, two buffers
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int key0 = int(blockIdx.x) * kKeys;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D, head_rows = std::size_t(blockIdx.y) * seq;
  q += head, k += head, v += head, dout += head, dq += head, dk += head, dv += head;
  lse += head_rows, delta += head_rows;

  const int tiles = (seq + kBq - 1) / kBq, first = Causal ? key0 / kBq : 0;
  auto load_tile = [&](int qt, int b) {
    mma::load_rows_async<kBq, D, kS, kThreads>(qs0 + b * kBq * kS, q, qt * kBq, seq);
    mma::load_rows_async<kBq, D, kS, kThreads>(dos0 + b * kBq * kS, dout, qt * kBq, seq);
    if (threadIdx.x < kBq) {
      const int r = qt * kBq + threadIdx.x;
      rows[b * 2 * kBq + threadIdx.x] = r < seq ? lse[r] * kLog2e : 0.f;
      rows[b * 2 * kBq + kBq + threadIdx.x] = r < seq ? delta[r] : 0.f;
    }
  };
  mma::load_rows_async<kKeys, D, kS, kThreads>(ks, k, key0, seq);
  mma::load_rows_async<kKeys, D, kS, kThreads>(vs, v, key0, seq);
  if (first < tiles) load_tile(first, 0);
  mma::cp_async_commit();

  float dk_acc[DN][4] = {}, dv_acc[DN][4] = {};
  const int wkey = 16 * warp;         // the warp's first key in the block
  const int krow0 = key0 + wkey + g;  // this lane's keys: krow0 and krow0 + 8
  const int qm = warp % 2, half = warp / 2;  // the warp's share of dQ: 16 queries, d/2 columns

  for (int qt = first; qt < tiles; ++qt) {
    const int b = (qt - first) & 1, row0 = qt * kBq;
    mma::cp_async_wait<0>();
    __syncthreads();  // tile qt has landed; every warp is done with tile qt - 1 (its buffer and dS^T)
    if (qt + 1 < tiles) load_tile(qt + 1, b ^ 1);
    mma::cp_async_commit();
    const float* qs = qs0 + b * kBq * kS;
    const float* dos = dos0 + b * kBq * kS;
    const float* tlse = rows + b * 2 * kBq;
    const float* tdelta = tlse + kBq;

    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys and the tile's queries, over d.
    float s[NQ][4] = {}, dp[NQ][4] = {};
#pragma unroll
    for (int kk = 0; kk < DN; ++kk) {
      const float* kr = ks + (wkey + g) * kS + 8 * kk + t;
      const float* vr = vs + (wkey + g) * kS + 8 * kk + t;
      const mma::Split ka[4] = {mma::split_tf32(kr[0]), mma::split_tf32(kr[8 * kS]), mma::split_tf32(kr[4]),
                                mma::split_tf32(kr[8 * kS + 4])};
      const mma::Split va[4] = {mma::split_tf32(vr[0]), mma::split_tf32(vr[8 * kS]), mma::split_tf32(vr[4]),
                                mma::split_tf32(vr[8 * kS + 4])};
#pragma unroll
      for (int n = 0; n < NQ; ++n) {
        const float* qr = qs + (8 * n + g) * kS + 8 * kk + t;
        const float* dr = dos + (8 * n + g) * kS + 8 * kk + t;
        mma::mma_3xtf32(s[n], ka, mma::split_tf32(qr[0]), mma::split_tf32(qr[4]));
        mma::mma_3xtf32(dp[n], va, mma::split_tf32(dr[0]), mma::split_tf32(dr[4]));
      }
    }
    // P^T = exp2(S^T scale log2 e - lse) and dS^T = P^T (dP^T - delta), in place; masked: a key or a
    // query past seq, a key after its query. dS^T also to shared memory, for dQ.
    const bool edge = row0 + kBq > seq || key0 + kKeys > seq || (Causal && row0 < key0 + kKeys);
#pragma unroll
    for (int n = 0; n < NQ; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 8 * n + 2 * t + (e & 1), query = row0 + c, key = krow0 + 8 * (e / 2);
        float p = mma::exp2_ftz(fmaf(s[n][e], scale_log2, -tlse[c]));
        if (edge && (query >= seq || key >= seq || (Causal && key > query))) p = 0.f;
        s[n][e] = p;
        dp[n][e] = p * (dp[n][e] - tdelta[c]);
        dst[(wkey + g + 8 * (e / 2)) * kSds + c] = dp[n][e];
      }

    // dV += P^T dO, then dK += dS^T Q, over the tile's queries: the n-tile kk of P^T (dS^T) is the
    // A fragment whose pair (t, t + 4) is queries (2t, 2t + 1), so dO's (Q's) rows 2t and 2t + 1
    // of the 8 are the B fragment's. Each sum is made in `part` and added in fp32.
    auto accumulate = [&](const float(&a_tiles)[NQ][4], const float* xs, float(&acc)[DN][4]) {
      float part[DN][4] = {};
#pragma unroll
      for (int kk = 0; kk < NQ; ++kk) {
        const float(&f)[4] = a_tiles[kk];
        const mma::Split a[4] = {mma::split_tf32(f[0]), mma::split_tf32(f[2]), mma::split_tf32(f[1]),
                                 mma::split_tf32(f[3])};
        const float* xr = xs + (8 * kk + 2 * t) * kS + g;
#pragma unroll
        for (int dn = 0; dn < DN; ++dn)
          mma::mma_3xtf32(part[dn], a, mma::split_tf32(xr[8 * dn]), mma::split_tf32(xr[kS + 8 * dn]));
      }
#pragma unroll
      for (int dn = 0; dn < DN; ++dn)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[dn][e] += part[dn][e];
    };
    accumulate(s, dos, dv_acc);
    accumulate(dp, qs, dk_acc);
    __syncthreads();  // dS^T complete

    // dQ for the warp's 16 queries and d/2 columns: dS (dS^T's columns, pairs of keys (2t, 2t + 1))
    // times K's rows 2t and 2t + 1 of each 8 keys.
    float dq_acc[DH][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKeys / 8; ++kk) {
      const float* a0 = dst + (8 * kk + 2 * t) * kSds + 16 * qm + g;
      const mma::Split a[4] = {mma::split_tf32(a0[0]), mma::split_tf32(a0[8]), mma::split_tf32(a0[kSds]),
                               mma::split_tf32(a0[kSds + 8])};
      const float* kr = ks + (8 * kk + 2 * t) * kS + 8 * DH * half + g;
#pragma unroll
      for (int dn = 0; dn < DH; ++dn)
        mma::mma_3xtf32(dq_acc[dn], a, mma::split_tf32(kr[8 * dn]), mma::split_tf32(kr[kS + 8 * dn]));
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int query = row0 + 16 * qm + g + 8 * h;
      if (query >= seq) continue;
#pragma unroll
      for (int dn = 0; dn < DH; ++dn)
        mma::atomic_add2(dq + std::size_t(query) * D + 8 * (DH * half + dn) + 2 * t, dq_acc[dn][2 * h] * scale,
                         dq_acc[dn][2 * h + 1] * scale);
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = krow0 + 8 * h;
    if (key >= seq) continue;
#pragma unroll
    for (int dn = 0; dn < DN; ++dn) {
      const std::size_t at = std::size_t(key) * D + 8 * dn + 2 * t;
      *reinterpret_cast<float2*>(dk + at) = make_float2(dk_acc[dn][2 * h] * scale, dk_acc[dn][2 * h + 1] * scale);
      *reinterpret_cast<float2*>(dv + at) = make_float2(dv_acc[dn][2 * h], dv_acc[dn][2 * h + 1]);
    }
  }
}

// The forward over bh heads: O, and lse (natural log) per row.
inline void forward(const float* q, const float* k, const float* v, float* o, float* lse, int bh, int seq, int d,
                    bool causal, float scale, cudaStream_t stream) {
  flash::dispatch(d, causal, [&](auto dc, auto c) {
    constexpr int D = decltype(dc)::value;
    using C = ForwardConfig<D>;
    auto kernel = flash_forward_3xtf32<D, decltype(c)::value>;
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes));
    const dim3 grid((seq + C::kBr - 1) / C::kBr, bh);
    kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(q, k, v, o, lse, seq, scale * kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}

// The backward over bh heads, from the forward's lse and delta = rowsum(dO o O): dK, dV written,
// dQ added to (zero it first: every key block adds its share atomically).
inline void backward(const float* q, const float* k, const float* v, const float* dout, const float* lse,
                     const float* delta, float* dq, float* dk, float* dv, int bh, int seq, int d, bool causal,
                     float scale, cudaStream_t stream) {
  flash::dispatch(d, causal, [&](auto dc, auto c) {
    constexpr int D = decltype(dc)::value;
    using C = BackwardConfig<D>;
    auto kernel = flash_backward_3xtf32<D, decltype(c)::value>;
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes));
    const dim3 grid((seq + C::kKeys - 1) / C::kKeys, bh);
    kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(q, k, v, dout, lse, delta, dq, dk, dv, seq, scale,
                                                         scale * kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}

}  // namespace flash3x
