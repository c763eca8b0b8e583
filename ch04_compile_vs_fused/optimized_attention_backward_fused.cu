// Fused (flash) attention backward in fp32: P is never stored; it is recomputed tile by tile from
// Q, K and the forward's log-sum-exp (P = exp(scale Q K^T - lse)), which costs one more product
// than the eager backward and saves every seq x seq tensor. A block owns 64 keys: their K and V
// rows stay in shared memory and their dK, dV accumulate in registers while the block streams the
// query tiles (Q, dO, lse and delta = rowsum(dO o O), which a small kernel computes first). Per
// query tile: P^T and dP^T = V dO^T as 64 x 64 register blocks, dS^T = P^T o (dP^T - delta), both
// staged in shared memory; dV += P^T dO, dK += dS^T Q, and the tile's share of dQ = dS K added to
// dQ in device memory with atomics (every key tile contributes to every query row). Five products
// per tile pair, as the FLOP count says. Causal: a key tile starts at the diagonal.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_fused
#include "attention.cuh"
#include "flash_tiles.cuh"

namespace {

using flash::kRows;
using flash::Tile;

template <int D>
struct BackwardShared {
  Tile<D> k, v, q, dout;
  Tile<kRows> p, ds;  // P^T and dS^T: rows are keys, columns queries
  float lse[kRows], delta[kRows];
};

template <int D, bool Causal>
__global__ void __launch_bounds__(flash::kThreads)
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

  flash::load_tile(sh.k, k, key0, seq);
  flash::load_tile(sh.v, v, key0, seq);
  float dk_acc[4][W] = {}, dv_acc[4][W] = {};

  const int tiles = (seq + kRows - 1) / kRows;
  for (int qt = Causal ? int(blockIdx.x) : 0; qt < tiles; ++qt) {
    const int row0 = qt * kRows;
    __syncthreads();  // the previous query tile is used up
    flash::load_tile(sh.q, q, row0, seq);
    flash::load_tile(sh.dout, dout, row0, seq);
    if (threadIdx.x < kRows) {
      const int r = row0 + threadIdx.x;
      sh.lse[threadIdx.x] = r < seq ? lse[r] * flash::kLog2e : INFINITY;  // a row beyond seq: P = 0
      sh.delta[threadIdx.x] = r < seq ? delta[r] : 0.f;
    }
    __syncthreads();

    float p[4][4] = {}, dp[4][4] = {};
    flash::product_nt<D>(sh.k, sh.q, ty, tx, p);      // (K Q^T)[key][query]
    flash::product_nt<D>(sh.v, sh.dout, ty, tx, dp);  // dP^T = V dO^T
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
    flash::product_nn<D>(sh.p, sh.dout, ty, tx, dv_acc);  // dV += P^T dO
    flash::product_nn<D>(sh.ds, sh.q, ty, tx, dk_acc);    // dK += dS^T Q
    float dq_part[4][W] = {};
    flash::product_tn<D>(sh.ds, sh.k, ty, tx, dq_part);  // (dS K)[query][:]
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int query = row0 + 4 * ty + i;
      if (query >= seq) continue;
#pragma unroll
      for (int w = 0; w < W; ++w) atomicAdd(dq + std::size_t(query) * D + flash::Cols<D>::col(tx, w), dq_part[i][w] * scale);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int key = key0 + 4 * ty + i;
    if (key >= seq) continue;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const std::size_t at = std::size_t(key) * D + flash::Cols<D>::col(tx, w);
      dk[at] = dk_acc[i][w] * scale;
      dv[at] = dv_acc[i][w];
    }
  }
}


// The variant's state: O and lse as the fused forward leaves them (computed before timing), and
// delta = rowsum(dO o O), computed at the start of every run.
struct Fused {
  using Topic = AttentionBackward;
  attn::SavedOutput saved;
  Fused(const AttentionBackward::Problem& p, cudaStream_t stream) : saved(p, stream) {}

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    saved.prologue(a, p.dout.data(), p.dq.data(), stream);  // delta, and dQ = 0 for the atomics
    flash::dispatch(a.d, a.causal, [&](auto dc, auto causal) {
      constexpr int D = decltype(dc)::value;
      auto kernel = flash_backward<D, decltype(causal)::value>;
      constexpr int bytes = sizeof(BackwardShared<D>);
      LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      const dim3 grid((a.seq + kRows - 1) / kRows, a.bh());
      kernel<<<grid, flash::kThreads, bytes, stream>>>(p.q.data(), p.k.data(), p.v.data(), p.dout.data(),
                                                       saved.lse.data(), saved.delta.data(), p.dq.data(), p.dk.data(),
                                                       p.dv.data(), a.seq, a.scale(), a.scale() * flash::kLog2e);
      LAB_CHECK(cudaGetLastError());
    });
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Fused, 2, "fused (flash) fp32: P recomputed per tile from lse, no seq^2 tensor");
