// Fused (flash) attention forward in fp32: one kernel, no seq x seq tensor in memory. A block owns
// 64 queries: their Q rows stay in shared memory (pre-multiplied by scale log2 e, so the softmax
// can use exp2) while the block streams K and V through shared memory 64 keys at a time. For each
// key tile it computes the 64 x 64 scores in registers (16 a thread), updates an online softmax
// per row (the running max m and sum l: when a new tile raises the max, the sum and the partial
// output are rescaled by exp2(m_old - m_new)), writes the tile's probabilities to shared memory and
// adds P V to the output in registers. At the end O = acc / l and lse = m + log l. The traffic is
// Q, K, V read (K and V once per query tile, mostly from L2) and O, lse written: O(seq d). What
// the compiled variant cannot do is exactly this: split the softmax across tiles of its row.
// Causal: a query tile stops at the diagonal tile (half the work), and the heaviest tiles are
// scheduled first.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused
#include "attention.cuh"
#include "flash_tiles.cuh"

namespace {

using flash::kRows;
using flash::Tile;

template <int D>
struct ForwardShared {
  Tile<D> q, k, v;
  Tile<kRows> p;
};

template <int D, bool Causal>
__global__ void __launch_bounds__(flash::kThreads, 2) flash_forward(const float* __restrict__ q, const float* __restrict__ k,
                                                                 const float* __restrict__ v, float* __restrict__ o,
                                                                 float* __restrict__ lse, int seq, float scale_log2) {
  constexpr int W = D / 16;
  extern __shared__ float4 smem[];
  ForwardShared<D>& sh = *reinterpret_cast<ForwardShared<D>*>(smem);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = tile * kRows;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D;
  q += head, k += head, v += head, o += head;

  flash::load_tile(sh.q, q, row0, seq, scale_log2);
  float m[4], l[4], acc[4][W] = {};
#pragma unroll
  for (int i = 0; i < 4; ++i) m[i] = -INFINITY, l[i] = 0.f;

  const int tiles = Causal ? tile + 1 : (seq + kRows - 1) / kRows;
  for (int kt = 0; kt < tiles; ++kt) {
    const int col0 = kt * kRows;
    __syncthreads();  // the previous tile's K, V and P are used up
    flash::load_tile(sh.k, k, col0, seq);
    flash::load_tile(sh.v, v, col0, seq);
    __syncthreads();

    float s[4][4] = {};
    flash::product_nt<D>(sh.q, sh.k, ty, tx, s);  // log2-scaled scores
    if (col0 + kRows > seq || (Causal && kt == tile)) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = col0 + 4 * tx + j;
          if (col >= seq || (Causal && col > row0 + 4 * ty + i)) s[i][j] = -INFINITY;
        }
    }
    // Online softmax, row by row; the 16 threads of a row are 16 consecutive lanes.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
#pragma unroll
      for (int off = 8; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, off));
      const float m_new = fmaxf(m[i], mx);  // finite: every row has a key at column 0
      const float alpha = exp2f(m[i] - m_new);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = exp2f(s[i][j] - m_new);
        sum += s[i][j];
      }
#pragma unroll
      for (int off = 8; off > 0; off /= 2) sum += __shfl_xor_sync(~0u, sum, off);
      l[i] = l[i] * alpha + sum;
      m[i] = m_new;
#pragma unroll
      for (int w = 0; w < W; ++w) acc[i][w] *= alpha;
      sh.p.st(4 * ty + i, tx, make_float4(s[i][0], s[i][1], s[i][2], s[i][3]));
    }
    __syncthreads();
    flash::product_nn<D>(sh.p, sh.v, ty, tx, acc);  // O += P V
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = row0 + 4 * ty + i;
    if (row >= seq) continue;
    const float inv = 1.f / l[i];
#pragma unroll
    for (int w = 0; w < W; ++w) o[std::size_t(row) * D + flash::Cols<D>::col(tx, w)] = acc[i][w] * inv;
    if (tx == 0) lse[std::size_t(blockIdx.y) * seq + row] = (m[i] + log2f(l[i])) / flash::kLog2e;
  }
}

}  // namespace

LAB_VARIANT_STEP(Attention, 2, "fused (flash) fp32: online softmax over K/V tiles, no seq^2 tensor",
                 .writes = {"lse"}) {
  const attn::Dims& a = p.dims;
  flash::dispatch(a.d, a.causal, [&](auto dc, auto causal) {
    constexpr int D = decltype(dc)::value;
    auto kernel = flash_forward<D, decltype(causal)::value>;
    constexpr int bytes = sizeof(ForwardShared<D>);
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const dim3 grid((a.seq + kRows - 1) / kRows, a.bh());
    kernel<<<grid, flash::kThreads, bytes, stream>>>(p.q.data(), p.k.data(), p.v.data(), p.o.data(), p.lse.data(),
                                                     a.seq, a.scale() * flash::kLog2e);
    LAB_CHECK(cudaGetLastError());
  });
}
