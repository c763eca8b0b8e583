// The fused GPT-2 steps' kernels (the steps' schedule, step.cuh, launches them). Each says what it
// fuses and why that is faster than the vanilla step's chain of kernels: a LayerNorm with the
// residual add and bias before it, GELU with its bias, the heads laid out with their bias, the
// loss with its gradient in one pass a row. They write the activations in the type the products
// read (float or bf16, the Products policy's Operand: policies.cuh).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "gpt2/eager/block_reduce.cuh"
#include "gpt2/eager/gpt2_eager.cuh"
#include "gpt2/gpt2.cuh"
#include "lab/launch.hpp"

namespace {

namespace ops = gpt2::eager;
using Buffer = lab::DeviceBuffer<float>;

constexpr int kThreads = 256;
constexpr int kMaxItems = 16;  // a row of up to 16 x 256 = 4096 floats in registers

unsigned blocks_for(std::size_t work) { return lab::grid_for(work, kThreads); }

// x / m and x % m, in 32 bits where x fits them (every index of a step that fits a device): a
// 64-bit division is a software routine of some 70 instructions. In 32 bits qkv_heads_kernel issues
// a fifth fewer (5.7M to 4.6M at small), but its time did not move (Nsight Compute, H100: 13.4 us
// and 48% of the memory's bandwidth before, 13.9 and 46% after): the layout kernels wait on memory,
// one 8-byte access a thread at a time, not on their arithmetic.
struct DivMod {
  std::size_t quot, rem;
  __device__ __forceinline__ DivMod(std::size_t x, unsigned m) {
    if (x <= 0xffffffffu) quot = unsigned(x) / m, rem = unsigned(x) % m;
    else quot = x / m, rem = x % m;
  }
};

// x in T (bf16: rounded to nearest, ties to even), and back.
template <class T>
__device__ __forceinline__ T to(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return __float2bfloat16(x);
}
__device__ __forceinline__ float as_float(float x) { return x; }
__device__ __forceinline__ float as_float(__nv_bfloat16 x) { return __bfloat162float(x); }
// Four consecutive values, the first at a multiple of 4: one 16-byte store in fp32, 8 in bf16.
__device__ __forceinline__ void store4(float* p, float4 x) { *reinterpret_cast<float4*>(p) = x; }
__device__ __forceinline__ void store4(__nv_bfloat16* p, float4 x) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y), hi = __floats2bfloat162_rn(x.z, x.w);
  uint2 u;
  u.x = *reinterpret_cast<const unsigned*>(&lo), u.y = *reinterpret_cast<const unsigned*>(&hi);
  *reinterpret_cast<uint2*>(p) = u;
}

// Four consecutive values (the first at a multiple of 4) as fp32: one 16-byte load, 8 in bf16.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x)),
               hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Two bf16 values packed in 32 bits (a uint4 of a 16-byte access holds four such pairs), as fp32;
// and two fp32 values rounded (to nearest, even) into such a pair.
__device__ __forceinline__ float2 bf16_pair(unsigned u) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
}
__device__ __forceinline__ unsigned bf16_pack(float a, float b) {
  const __nv_bfloat162 y = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const unsigned*>(&y);
}

// V consecutive values as fp32 (V = 1 or 4; with 4, the first at a multiple of 4): loaded and
// stored with one access of 4 V bytes in fp32, 2 V in bf16 (stores rounded to nearest, even).
template <int V>
struct Vec {
  float e[V];
};
template <int V, class T>
__device__ __forceinline__ Vec<V> loadv(const T* p) {
  if constexpr (V == 1) {
    return {as_float(*p)};
  } else {
    static_assert(V == 4, "1 or 4 values");
    const float4 t = load4(p);
    return {t.x, t.y, t.z, t.w};
  }
}
template <int V, class T>
__device__ __forceinline__ void storev(T* p, const Vec<V>& v) {
  if constexpr (V == 1) *p = to<T>(v.e[0]);
  else store4(p, make_float4(v.e[0], v.e[1], v.e[2], v.e[3]));
}

// Adds a block's column sums into dst[0, count) with one atomic a column, a warp's 32 atomics on 32
// consecutive columns: put(stage) first writes each thread's sums into shared memory at their
// columns (stage[c] for column c, every c < count written, by some thread), then the block adds
// them in column order. Added from a thread's own consecutive columns, a warp's atomics would touch
// a line of L2 a column group: the LayerNorm backward with four columns a thread took 47 us at
// small, 26.5 with this. Every thread of the block calls it.
template <class Put>
__device__ __forceinline__ void add_staged_columns(float* stage, float* dst, int count, Put&& put) {
  put(stage);
  __syncthreads();
  for (int c = threadIdx.x; c < count; c += blockDim.x) atomicAdd(&dst[c], stage[c]);
  __syncthreads();
}

// Calls f(std::integral_constant<int, Items>{}) with the fewest items a thread that cover d.
template <class F>
void with_items(int d, F&& f) {
  if (d <= kThreads) return f(std::integral_constant<int, 1>{});
  if (d <= 2 * kThreads) return f(std::integral_constant<int, 2>{});
  if (d <= 4 * kThreads) return f(std::integral_constant<int, 4>{});
  if (d <= 8 * kThreads) return f(std::integral_constant<int, 8>{});
  f(std::integral_constant<int, kMaxItems>{});
}
// Calls f(items, v) with v = 4 (16-byte accesses, 4 columns a thread) when d is a multiple of 4,
// else 1, and the fewest items a thread of V columns that cover d.
template <class F>
void with_vec_items(int d, F&& f) {
  using Four = std::integral_constant<int, 4>;
  using One = std::integral_constant<int, 1>;
  if (d % 4 != 0) return with_items(d, [&](auto items) { f(items, One{}); });
  with_items((d + 3) / 4, [&](auto items) {
    if constexpr (decltype(items)::value <= 4) f(items, Four{});
    else throw lab::Error("the row kernels hold d_model <= 4096 in registers, not " + std::to_string(d));
  });
}

// x_out = x + (y + bias) (the residual; y and bias null: x itself), then ln = LayerNorm(x_out) with
// its mean and rstd kept: a block a row, thread t holding columns t, t + 256, ... in registers.
// x_out may be x. ln is written in the type the products read (Out): in bf16, half the bytes, and
// no pass of the products' own to round it.
template <int Items, class Out>
__global__ void __launch_bounds__(kThreads)
    residual_layer_norm_kernel(const float* x, const float* __restrict__ y, const float* __restrict__ bias,
                               float* x_out, const float* __restrict__ w, const float* __restrict__ b,
                               Out* __restrict__ ln, float* __restrict__ mean, float* __restrict__ rstd, int d) {
  const std::size_t off = std::size_t(blockIdx.x) * d;
  float v[Items], s = 0;
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    const int j = threadIdx.x + k * kThreads;
    v[k] = 0;
    if (j < d) v[k] = y ? x[off + j] + (y[off + j] + bias[j]) : x[off + j];
    s += v[k];
  }
  const float mu = blockwide::sum<kThreads>(s) * (1.f / d);
  float q = 0;
#pragma unroll
  for (int k = 0; k < Items; ++k)
    if (threadIdx.x + k * kThreads < d) q += (v[k] - mu) * (v[k] - mu);
  const float rs = rsqrtf(blockwide::sum<kThreads>(q) * (1.f / d) + float(gpt2::kLayerNormEps));
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j >= d) continue;
    if (y) x_out[off + j] = v[k];
    ln[off + j] = to<Out>((v[k] - mu) * rs * w[j] + b[j]);
  }
  if (threadIdx.x == 0) mean[blockIdx.x] = mu, rstd[blockIdx.x] = rs;
}

// y = x in T (bf16: rounded to nearest, ties to even): a block's weights for its products.
// With V = 4: four values a thread (n a multiple of 4, x and y aligned to them), one 16-byte load.
template <int V, class T>
__global__ void round_kernel(const float* __restrict__ x, T* __restrict__ y, std::size_t n) {
  for (std::size_t i : lab::grid_stride(n / V)) storev<V>(y + V * i, loadv<V>(x + V * i));
}

// ln = LayerNorm(x) again from the mean and rstd the forward kept, for the backward: the forward's
// expression on the same fp32 values, so the same output. V columns a thread (4: d a multiple of
// 4, 16-byte loads); launched by layer_norm_again below.
template <int V, class Out>
__global__ void __launch_bounds__(kThreads)
    layer_norm_again_kernel(const float* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd,
                            const float* __restrict__ w, const float* __restrict__ b, Out* __restrict__ ln,
                            std::size_t rows, int d) {
  // The rows as one flat range of V-column groups, grid-strided: a block a row left a quarter of
  // its threads idle at d = 768 and ended after one load each (40% of the warps the SMs hold, now
  // 80%). In the step's graph 9.3 us a launch became 8.2 at small (H100, --profile); alone, its
  // caches flushed, Nsight Compute times it at 7.9 us before and 8.7 after: 12.6 MB is too little
  // for either form to reach the bandwidth.
  const int groups = d / V;
  for (std::size_t g : lab::grid_stride(rows * groups)) {
    const DivMod at(g, unsigned(groups));
    const std::size_t row = at.quot;
    const int j = int(at.rem) * V;
    const float mu = mean[row], rs = rstd[row];
    const Vec<V> xv = loadv<V>(x + row * d + j), wv = loadv<V>(w + j), bv = loadv<V>(b + j);
    Vec<V> y;
#pragma unroll
    for (int i = 0; i < V; ++i) y.e[i] = (xv.e[i] - mu) * rs * wv.e[i] + bv.e[i];
    storev<V>(ln + row * d + j, y);
  }
}

// layer_norm_again_kernel over `rows` rows of d, 16-byte accesses where d allows.
template <class Out>
void layer_norm_again(const float* x, const float* mean, const float* rstd, const float* w, const float* b, Out* ln,
                      std::size_t rows, int d, cudaStream_t stream) {
  if (d % 4 == 0)
    layer_norm_again_kernel<4><<<blocks_for(rows * d / 4), kThreads, 0, stream>>>(x, mean, rstd, w, b, ln, rows, d);
  else
    layer_norm_again_kernel<1><<<blocks_for(rows * d), kThreads, 0, stream>>>(x, mean, rstd, w, b, ln, rows, d);
  LAB_CHECK(cudaGetLastError());
}

// The LayerNorm backward: dres += dx (or = dx when !accumulate), dx = rstd (g - mean(g) - xhat
// mean(g xhat)) with g = dy w, dy read in Dy (fp32, or bf16 where the product before the
// LayerNorm wrote its input gradient so: optimized_gpt2_step_fused_bf16_ln_grads.cu); and dw += sum dy xhat, db += sum dy over the block's rows, kept in
// registers across its rows and added atomically once (dw, db zeroed before). The new dres is the
// residual stream's gradient, which the product before the LayerNorm takes as its dY: when next_dy
// is given, it is also written there in Grad (the products' type for dY), and when next_db is given
// its column sums (that product's bias gradient, from the fp32 values) are added there as dw's are.
//
// A block walks its rows (8 or more at scale) with the next row's dy, x and dres loaded while it
// works on the current one: double buffering in registers (kAhead, below). Loaded in turn (dy and
// x, the two sums, then dres), a row cost three waits on memory a block. The two sums go through
// shared memory together (sum2). On the H100 at small: 25.0 us to 23.6 a launch (Nsight Compute),
// 0.685 ms a step to 0.597 (--profile). Still 53% of the bandwidth: its 512 blocks of 256 threads
// give an SM 31 warps of its 64, and each waits on its block's barriers twice a row.
// Tried in session 66 and not kept (branch s66-lnb): at d = 768 a block of 6 warps, the fewest whose
// four columns a thread cover the row (256 threads leave 64 idle), and a grid of the blocks the SMs
// hold at once (660 of 192 threads; 61 registers either way). On an H200 in step 17 at small
// (Nsight Compute, four launches each) it took 21.6 to 27.3 us a launch against this kernel's 19.6
// to 23.7, its achieved occupancy 40-41% against 44-45%; the step 7.85 to 7.88 ms against 7.77 to
// 7.84, alternated three times (12.4 both at medium). With the residual LayerNorm's forward also in
// 16-byte accesses on 6 warps, the step was level with this one (7.79 to 7.84 ms; 12.3 to 12.4).
template <int Items, int V, class Grad = float, class Dy = float>
__global__ void __launch_bounds__(kThreads)
    layer_norm_backward_kernel(const Dy* __restrict__ dy, const float* __restrict__ x, const float* __restrict__ w,
                               const float* __restrict__ mean, const float* __restrict__ rstd, float* dres, float* dw,
                               float* db, std::size_t rows, int d, bool accumulate, Grad* __restrict__ next_dy = nullptr,
                               float* next_db = nullptr) {
  // Thread t holds columns V (t + k 256) to V (t + k 256) + V - 1, item k (V = 4: d a multiple of 4).
  Vec<V> wj[Items], aw[Items] = {}, ab[Items] = {}, an[Items] = {};
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    const int j = V * (threadIdx.x + k * kThreads);
    wj[k] = j < d ? loadv<V>(w + j) : Vec<V>{};
  }
  // A row ahead where a thread holds one item (d <= 1024 in fours: GPT-2 small and medium, 61
  // registers where 48 did). Past that the second row's registers would halve the blocks an SM
  // holds (126 registers to 165 at four items), so the row is loaded as it is reached, dres after
  // the sums, as before.
  constexpr bool kAhead = Items == 1;
  struct Row {  // what a row's arithmetic reads
    Vec<V> dy[Items], x[Items], res[Items];
    float mu, rs;
  };
  auto load = [&](std::size_t row, Row& in) {
    const std::size_t off = row * d;
    in.mu = mean[row], in.rs = rstd[row];
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int j = V * (threadIdx.x + k * kThreads);
      in.dy[k] = {}, in.x[k] = {}, in.res[k] = {};
      if (j < d) {
        in.dy[k] = loadv<V>(dy + off + j), in.x[k] = loadv<V>(x + off + j);
        if (kAhead && accumulate) in.res[k] = loadv<V>(dres + off + j);
      }
    }
  };
  Row cur{};
  if (kAhead && blockIdx.x < rows) load(blockIdx.x, cur);
  for (std::size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    Row next{};
    if (!kAhead) load(row, cur);
    else if (row + gridDim.x < rows) load(row + gridDim.x, next);
    const std::size_t off = row * d;
    const float mu = cur.mu, rs = cur.rs;
    Vec<V> g[Items], xh[Items];
    float2 sums = {0.f, 0.f};  // sum g, sum g xhat
#pragma unroll
    for (int k = 0; k < Items; ++k) {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float dyv = cur.dy[k].e[i];
        xh[k].e[i] = (cur.x[k].e[i] - mu) * rs;
        g[k].e[i] = dyv * wj[k].e[i];
        aw[k].e[i] += dyv * xh[k].e[i];
        ab[k].e[i] += dyv;
      }
#pragma unroll
      for (int i = 0; i < V; ++i) sums.x += g[k].e[i], sums.y += g[k].e[i] * xh[k].e[i];
    }
    const float2 total = blockwide::sum2<kThreads>(sums);
    const float mean_g = total.x * (1.f / d), mean_gx = total.y * (1.f / d);
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int j = V * (threadIdx.x + k * kThreads);
      if (j >= d) continue;
      Vec<V> r = kAhead ? cur.res[k] : accumulate ? loadv<V>(dres + off + j) : Vec<V>{};
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float dx = rs * (g[k].e[i] - mean_g - xh[k].e[i] * mean_gx);
        r.e[i] += dx;
        an[k].e[i] += r.e[i];
      }
      storev<V>(dres + off + j, r);
      if (next_dy) storev<V>(next_dy + off + j, r);
    }
    if (kAhead) cur = next;
  }
  // The column sums added into dw, db (and next_db) through shared memory (add_staged_columns).
  __shared__ float stage[kMaxItems * kThreads];  // d <= 4096 columns
  auto add_columns = [&](float* dst, const Vec<V>* sums) {
    add_staged_columns(stage, dst, d, [&](float* st) {
#pragma unroll
      for (int k = 0; k < Items; ++k)
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const int j = V * (threadIdx.x + k * kThreads) + i;
          if (j < d) st[j] = sums[k].e[i];
        }
    });
  };
  add_columns(dw, aw);
  add_columns(db, ab);
  if (next_db) add_columns(next_db, an);
}

// The heads' layout: element i of a (B, h, T, dp) tensor, dp >= hd the width the flash kernels
// take (a power of two: flash_width), is column head hd + c of row b T + t when c < hd, and
// padding (zero) when c >= hd.
struct HeadIndex {
  std::size_t row, col;
  bool real;
  __device__ HeadIndex(std::size_t i, int context, int h, int hd, int dp) {
    const std::size_t c = i & std::size_t(dp - 1);
    const DivMod t(i >> (__ffs(dp) - 1), unsigned(context));  // i / dp = bh T + t
    const DivMod bh(t.quot, unsigned(h));                       // bh = b h + head
    row = bh.quot * context + t.rem;
    col = bh.rem * hd + c;
    real = c < std::size_t(hd);
  }
};

// Q, K, V by head from the QKV product's rows (B T x 3d), each plus its bias, in the type the
// attention reads (T); zeros in the padding. The rows in fp32 (In = float), or already in bf16 with
// their bias (the product's epilogue added it: bias null), then only laid out by head.
// A thread takes V consecutive elements of a head row (V = 4: hd a multiple of 4, so that the four
// are all of the head or all padding; 16-byte loads of fp32 rows and the bias, 8-byte of bf16).
template <int V, class T, class In>
__global__ void qkv_heads_kernel(const In* __restrict__ qkv, const float* __restrict__ bias, T* __restrict__ q,
                                 T* __restrict__ k, T* __restrict__ v, std::size_t n, int context, int h, int hd,
                                 int dp) {
  const int d = h * hd;
  for (std::size_t g : lab::grid_stride(n / V)) {
    const std::size_t i = V * g;
    const HeadIndex at(i, context, h, hd, dp);
    if (!at.real) {
      storev<V>(q + i, Vec<V>{}), storev<V>(k + i, Vec<V>{}), storev<V>(v + i, Vec<V>{});
      continue;
    }
    const In* r = qkv + at.row * 3 * d + at.col;
    Vec<V> out[3];
#pragma unroll
    for (int part = 0; part < 3; ++part) {
      out[part] = loadv<V>(r + part * d);
      if (bias) {
        const Vec<V> b = loadv<V>(bias + part * d + at.col);
#pragma unroll
        for (int e = 0; e < V; ++e) out[part].e[e] += b.e[e];
      }
    }
    storev<V>(q + i, out[0]), storev<V>(k + i, out[1]), storev<V>(v + i, out[2]);
  }
}

// O by head back into rows (B T x d), in the type the products read (T); the padding dropped.
template <class T>
__global__ void merge_heads_kernel(const float* __restrict__ o, T* __restrict__ att, std::size_t n, int context,
                                   int h, int hd, int dp) {
  for (std::size_t i : lab::grid_stride(n)) {
    const HeadIndex at(i, context, h, hd, dp);
    if (at.real) att[at.row * std::size_t(h) * hd + at.col] = to<T>(o[i]);
  }
}

// The backward's way back: dQ, dK, dV by head into the rows of dQKV (B T x 3d).
__global__ void qkv_rows_kernel(const float* __restrict__ dq, const float* __restrict__ dk,
                                const float* __restrict__ dv, float* __restrict__ dqkv, std::size_t n, int context,
                                int h, int hd, int dp) {
  const int d = h * hd;
  for (std::size_t i : lab::grid_stride(n)) {
    const HeadIndex at(i, context, h, hd, dp);
    if (!at.real) continue;
    float* r = dqkv + at.row * 3 * d + at.col;
    r[0] = dq[i], r[d] = dk[i], r[2 * d] = dv[i];
  }
}

// qkv_rows_kernel's way back with the QKV product's bias gradient: dQKV's rows written in Grad (the
// products' type for dY), and its column sums (from the fp32 values) added to db (zeroed before).
// A thread owns one column of dQKV and walks the rows grid-strided, its column's sum in a register
// until one atomic add at the end; a warp's columns are consecutive, within a head where hd >= 32.
// It writes `parts` of the three (dQ, dK, dV) from `first` on: the columns [first d, (first +
// parts) d); the grid covers parts d columns (column_owner_grid(rows, parts d)).
template <class Grad>
__global__ void __launch_bounds__(kThreads)
    qkv_rows_sum_kernel(const float* __restrict__ dq, const float* __restrict__ dk, const float* __restrict__ dv,
                        Grad* __restrict__ dqkv, float* __restrict__ db, std::size_t rows, int context, int h, int hd,
                        int dp, int first = 0, int parts = 3) {
  const int d = h * hd, c = first * d + blockIdx.x * kThreads + threadIdx.x;
  if (c >= (first + parts) * d) return;
  const int part = c / d, head = c % d / hd, cc = c % d % hd;
  const float* src = (part == 0 ? dq : part == 1 ? dk : dv) + std::size_t(head) * context * dp + cc;
  float s = 0;
  // Row r = b T + t: b and t carried along the walk, no 64-bit division a row (15.4 us to 13.4 at
  // small, H100; 0.164 ms a step to 0.145).
  std::size_t b = blockIdx.y / context;
  int t = int(blockIdx.y % context);
  const int step_b = int(gridDim.y / context), step_t = int(gridDim.y % context);
  for (std::size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float v = src[(b * h * context + t) * dp];
    dqkv[r * 3 * d + c] = to<Grad>(v);
    s += v;
    b += step_b, t += step_t;
    if (t >= context) t -= context, ++b;
  }
  atomicAdd(&db[c], s);
}

// dO by head from the projection's input gradient (B T x d), in the type the attention reads (T),
// zeros in the padding, and delta = rowsum(dO o O) for the flash backward, O read from the merged
// attention output the forward kept (in the products' type, A), dO in fp32: a warp a head row.
template <class A, class T>
__global__ void dout_heads_kernel(const float* __restrict__ datt, const A* __restrict__ att, T* __restrict__ dout,
                                  float* __restrict__ delta, std::size_t head_rows, int context, int h, int hd,
                                  int dp) {
  const std::size_t hr = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (hr >= head_rows) return;
  float s = 0;
  for (int c = lane; c < dp; c += 32) {
    const HeadIndex at(hr * dp + c, context, h, hd, dp);
    if (!at.real) {
      dout[hr * dp + c] = to<T>(0.f);
      continue;
    }
    const std::size_t r = at.row * std::size_t(h) * hd + at.col;
    dout[hr * dp + c] = to<T>(datt[r]);
    s += datt[r] * as_float(att[r]);
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(~0u, s, o);
  if (lane == 0) delta[hr] = s;
}

// dout_heads_kernel with four columns a thread (hd a multiple of 4: 16-byte loads of dO's rows):
// a head row's dp / 4 threads (4 to 32, consecutive lanes of one warp) each sum their four
// products, and shuffles within the group add them.
template <class A, class T>
__global__ void dout_heads4_kernel(const float* __restrict__ datt, const A* __restrict__ att, T* __restrict__ dout,
                                   float* __restrict__ delta, std::size_t head_rows, int context, int h, int hd,
                                   int dp) {
  const int group = dp / 4;  // a power of two (dp: flash_width)
  const std::size_t id = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, hr = id >> (__ffs(group) - 1);
  const int c = int(id & (group - 1)) * 4;
  float s = 0;
  if (hr < head_rows) {
    const DivMod t(hr, unsigned(context)), bh(t.quot, unsigned(h));
    const std::size_t r = (bh.quot * context + t.rem) * std::size_t(h) * hd + bh.rem * hd + c;
    Vec<4> x{};
    if (c < hd) {
      x = loadv<4>(datt + r);
      const Vec<4> o = loadv<4>(att + r);
#pragma unroll
      for (int e = 0; e < 4; ++e) s += x.e[e] * o.e[e];
    }
    storev<4>(dout + hr * dp + c, x);
  }
  for (int o = group / 2; o > 0; o /= 2) s += __shfl_xor_sync(~0u, s, o);
  if (hr < head_rows && c == 0) delta[hr] = s;
}

// The width the flash kernels take for a head of hd: 16, 32, 64 or 128 (0: none, hd > 128).
constexpr int flash_width(int hd) {
  for (int w : {16, 32, 64, 128})
    if (hd <= w) return w;
  return 0;
}

// GELU and its slope, each from erf(x / sqrt 2): gelu_of and dgelu_of take it made, so that a kernel
// that needs both (gelu_backward_act_kernel) computes it once and gets the same values as gelu()
// and dgelu().
__device__ __forceinline__ float gelu_erf(float x) { return erff(x * 0.70710678118654752f); }
__device__ __forceinline__ float gelu_of(float x, float erf) { return 0.5f * x * (1.f + erf); }
__device__ __forceinline__ float gelu(float x) { return gelu_of(x, gelu_erf(x)); }

// h = y + bias, kept for the backward, and act = gelu(h), both in the type the products read (T):
// 16-byte accesses to y (cols = 4d, a multiple of 4); the bias read a float at a time (its offset in
// the parameters is a multiple of 4 floats only when d is). In bf16, h is rounded once, after its
// bias, and GELU taken at the rounded value, the value the backward's GELU' will see (as autocast
// computes them: the linear layer's output in bf16, GELU on it); in fp32, y may be h (in place).
// act is not kept: the backward makes it again from h (gelu_kernel), a pass it would otherwise
// spend reading it, and the step saves 4 d values a token a block.
template <class T>
__global__ void bias_gelu_kernel(const float* y, const float* __restrict__ bias, T* h, T* __restrict__ act,
                                 std::size_t n4, int cols4) {
  for (std::size_t i : lab::grid_stride(n4)) {
    float4 t = load4(y + 4 * i);
    const float* b = bias + i % cols4 * 4;
    t.x = as_float(to<T>(t.x + b[0])), t.y = as_float(to<T>(t.y + b[1]));
    t.z = as_float(to<T>(t.z + b[2])), t.w = as_float(to<T>(t.w + b[3]));
    store4(h + 4 * i, t);
    store4(act + 4 * i, make_float4(gelu(t.x), gelu(t.y), gelu(t.z), gelu(t.w)));
  }
}

// act = gelu(h) again, for the backward: the same values the forward's pass wrote. Q quads a
// thread (Q = 2: n4 even, h and act aligned to 8 values; in bf16 one 16-byte access each way).
// gelu_quads is one thread's share, i its index: each element read before the same thread writes
// it, so the forward alone runs it over h in place (gelu_in_place_kernel).
template <int Q, class T>
__device__ __forceinline__ void gelu_quads(const T* h, T* act, std::size_t i) {
  auto g4 = [](float4 t) { return make_float4(gelu(t.x), gelu(t.y), gelu(t.z), gelu(t.w)); };
  if constexpr (Q == 1) {
    store4(act + 4 * i, g4(load4(h + 4 * i)));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint4 u = reinterpret_cast<const uint4*>(h)[i];
    const unsigned in[4] = {u.x, u.y, u.z, u.w};
    unsigned out[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 t = bf16_pair(in[k]);
      out[k] = bf16_pack(gelu(t.x), gelu(t.y));
    }
    reinterpret_cast<uint4*>(act)[i] = make_uint4(out[0], out[1], out[2], out[3]);
  } else {
    store4(act + 8 * i, g4(load4(h + 8 * i)));
    store4(act + 8 * i + 4, g4(load4(h + 8 * i + 4)));
  }
}
template <int Q, class T>
__global__ void gelu_kernel(const T* __restrict__ h, T* __restrict__ act, std::size_t n4) {
  for (std::size_t i : lab::grid_stride(n4 / Q)) gelu_quads<Q>(h, act, i);
}
template <int Q, class T>
__global__ void gelu_in_place_kernel(T* h, std::size_t n4) {
  for (std::size_t i : lab::grid_stride(n4 / Q)) gelu_quads<Q>(h, h, i);
}

__device__ __forceinline__ float dgelu_of(float x, float erf) {  // as the vanilla step's (gpt2_eager.cu)
  const float cdf = 0.5f * (1.f + erf);
  const float pdf = expf(-0.5f * x * x) * 0.39894228040143268f;
  return cdf + x * pdf;
}
__device__ __forceinline__ float dgelu(float x) { return dgelu_of(x, gelu_erf(x)); }

// g *= gelu'(h), in place: the gradient of the MLP's output becomes its pre-activation's.
template <class T>
__global__ void gelu_backward_kernel(float4* g, const T* __restrict__ h, std::size_t n4) {
  for (std::size_t i : lab::grid_stride(n4)) {
    float4 d = g[i];
    const float4 t = load4(h + 4 * i);
    d.x *= dgelu(t.x), d.y *= dgelu(t.y), d.z *= dgelu(t.z), d.w *= dgelu(t.w);
    g[i] = d;
  }
}

// The walk of a kernel whose threads own four consecutive columns each (thread t of block x the
// quad c4 = x kThreads + t of each row, cols4 quads a row): down the rows grid-strided, f(i) for
// each quad i = r cols4 + c4 (its values from 4 i on) returning the four values to sum, the sums in
// registers until the block adds them into db through shared memory (add_staged_columns: the
// block's 4 x 256 columns from `first` on, thread t's four at 4 t).
template <class F>
__device__ __forceinline__ void walk_quads_summed(std::size_t rows, int cols4, float* db, F&& f) {
  const int c4 = blockIdx.x * kThreads + threadIdx.x;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  if (c4 < cols4) {
    for (std::size_t r = blockIdx.y; r < rows; r += gridDim.y) {
      const float4 v = f(r * cols4 + c4);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
  }
  __shared__ float stage[4 * kThreads];
  const int first = 4 * blockIdx.x * kThreads;
  add_staged_columns(stage, db + first, ::min(4 * kThreads, 4 * cols4 - first),
                     [&](float* st) { reinterpret_cast<float4*>(st)[threadIdx.x] = s; });
}

// gelu_backward_kernel with the MLP's first product's bias gradient: dh = g gelu'(h) written in
// Grad (the products' type for dY) and its column sums (from the fp32 values) added to db (zeroed
// before). A thread owns four consecutive columns (16-byte loads of g in fp32, 8-byte in bf16: G,
// the type the MLP's second product wrote its input gradient in) and walks the rows grid-strided,
// the four sums in registers until the block adds them into db at the end.
template <class T, class Grad, class G = float>
__global__ void __launch_bounds__(kThreads)
    gelu_backward_sum_kernel(const G* __restrict__ g, const T* __restrict__ h, Grad* __restrict__ dh,
                             float* __restrict__ db, std::size_t rows, int cols4) {
  walk_quads_summed(rows, cols4, db, [&](std::size_t i) {
    float4 v = load4(g + 4 * i);
    const float4 t = load4(h + 4 * i);
    v.x *= dgelu(t.x), v.y *= dgelu(t.y), v.z *= dgelu(t.z), v.w *= dgelu(t.w);
    store4(dh + 4 * i, v);
    return v;
  });
}

// gelu_backward_sum_kernel that also makes GELU's output again, for the weight gradient of the MLP's
// second product (optimized_gpt2_step_fused_bf16_gelu_once.cu): act = gelu(h) in T, the values
// gelu_kernel writes (the same erf serves gelu and gelu', one erff and one expf an element where
// the two passes spent two erff and an expf), and dh written over g (bf16 both, G = Grad: each
// element read before the same thread writes it, so g and dh carry no __restrict__).
template <class T, class Grad>
__global__ void __launch_bounds__(kThreads)
    gelu_backward_act_kernel(Grad* g, const T* __restrict__ h, T* __restrict__ act, float* __restrict__ db,
                             std::size_t rows, int cols4) {
  walk_quads_summed(rows, cols4, db, [&](std::size_t i) {
    float4 v = load4(g + 4 * i);
    const float4 t = load4(h + 4 * i);
    const float4 e = make_float4(gelu_erf(t.x), gelu_erf(t.y), gelu_erf(t.z), gelu_erf(t.w));
    store4(act + 4 * i, make_float4(gelu_of(t.x, e.x), gelu_of(t.y, e.y), gelu_of(t.z, e.z), gelu_of(t.w, e.w)));
    v.x *= dgelu_of(t.x, e.x), v.y *= dgelu_of(t.y, e.y), v.z *= dgelu_of(t.z, e.z), v.w *= dgelu_of(t.w, e.w);
    store4(g + 4 * i, v);
    return v;
  });
}

// A block's small gradients at the start of its backward (with the products' dY made in bf16,
// steps 7 on): zeroes the LayerNorms' gains and shifts and the QKV, projection and MLP-first
// biases, which kernels then add into with atomics, and moves the MLP's second bias gradient from
// carry (the stage above's LayerNorm backward summed it there) into place, zeroing carry for this
// block's first LayerNorm backward: one launch where there were eight memsets and a copy, about
// 1.5 us each in the graph.
struct SmallGrads {
  static constexpr int kParts = 7;
  float* zero[kParts];
  int count[kParts];
  float* carry;   // d values
  float* fc2_b;   // d values
  int d;
};
__global__ void small_grads_kernel(SmallGrads g) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int t = 0; t < SmallGrads::kParts; ++t)
    if (i < g.count[t]) g.zero[t][i] = 0.f;
  if (i < g.d) g.fc2_b[i] = g.carry[i], g.carry[i] = 0.f;
}

// The grid of gelu_backward_sum_kernel, gelu_backward_act_kernel and qkv_rows_sum_kernel: x covers
// the columns (`units` a row, a thread each), y as many row strides as keep about 1024 blocks of 256
// threads in flight (8 an SM on the H100's 132).
inline dim3 column_owner_grid(std::size_t rows, int units) {
  const unsigned x = static_cast<unsigned>((units + kThreads - 1) / kThreads);
  const unsigned y = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(rows, 1024 / x)));
  return {x, y};
}

// gelu_backward_act_kernel with more bytes in flight (optimized_gpt2_step_fused_bf16_gelu_in_flight.cu
// tells the lesson). That kernel's thread owns four columns and walks the rows one at a time: an
// 8-byte load of g and of h, then some 40 instructions an element (erff's polynomial, expf) before
// its next load, so while a warp computes, its memory waits. Here a thread owns eight consecutive
// columns (one 16-byte access each of g, h, act and dh, all bf16) and takes kInFlightRows rows at a
// time: their eight loads issued before the first row's arithmetic, 128 bytes a thread in flight
// where there were 16. Blocks of 128 threads (GPT-2's 4 d columns are 3 to 7 such blocks wide), and
// about 1024 of them, each walking its rows kInFlightRows at a time (gelu_in_flight_grid).
// The arithmetic is gelu_backward_act_kernel's, value for value: the same gelu_of and dgelu_of on
// the same erf, dh and act rounded once into bf16, the column sums of the fp32 dh added into db
// (zeroed before) through shared memory, one atomic a column a block; only the sums' order differs.
// cols8 = cols / 8; g, h, act 16-byte aligned (gelu_in_flight_fits).
constexpr int kInFlightRows = 4, kInFlightThreads = 128;
__global__ void __launch_bounds__(kInFlightThreads)
    gelu_backward_act_in_flight_kernel(__nv_bfloat16* g, const __nv_bfloat16* __restrict__ h,
                                       __nv_bfloat16* __restrict__ act, float* __restrict__ db, std::size_t rows,
                                       int cols8) {
  const int c8 = blockIdx.x * kInFlightThreads + threadIdx.x;
  float s[8] = {};
  if (c8 < cols8) {
    const std::size_t stride = std::size_t(gridDim.y) * kInFlightRows;
    for (std::size_t r0 = std::size_t(blockIdx.y) * kInFlightRows; r0 < rows; r0 += stride) {
      uint4 gv[kInFlightRows], hv[kInFlightRows];
#pragma unroll
      for (int k = 0; k < kInFlightRows; ++k)
        if (r0 + k < rows) {
          const std::size_t i = (r0 + k) * cols8 + c8;
          gv[k] = reinterpret_cast<const uint4*>(g)[i];
          hv[k] = __ldg(reinterpret_cast<const uint4*>(h) + i);
        }
#pragma unroll
      for (int k = 0; k < kInFlightRows; ++k)
        if (r0 + k < rows) {
          const unsigned gi[4] = {gv[k].x, gv[k].y, gv[k].z, gv[k].w}, hi[4] = {hv[k].x, hv[k].y, hv[k].z, hv[k].w};
          unsigned a[4], d[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float2 t = bf16_pair(hi[q]);
            float2 v = bf16_pair(gi[q]);
            const float e0 = gelu_erf(t.x), e1 = gelu_erf(t.y);
            a[q] = bf16_pack(gelu_of(t.x, e0), gelu_of(t.y, e1));
            v.x *= dgelu_of(t.x, e0), v.y *= dgelu_of(t.y, e1);
            s[2 * q] += v.x, s[2 * q + 1] += v.y;
            d[q] = bf16_pack(v.x, v.y);
          }
          const std::size_t i = (r0 + k) * cols8 + c8;
          reinterpret_cast<uint4*>(act)[i] = make_uint4(a[0], a[1], a[2], a[3]);
          reinterpret_cast<uint4*>(g)[i] = make_uint4(d[0], d[1], d[2], d[3]);
        }
    }
  }
  __shared__ float stage[8 * kInFlightThreads];
  const int first = 8 * blockIdx.x * kInFlightThreads;
  add_staged_columns(stage, db + first, ::min(8 * kInFlightThreads, 8 * cols8 - first), [&](float* st) {
    reinterpret_cast<float4*>(st)[2 * threadIdx.x] = make_float4(s[0], s[1], s[2], s[3]);
    reinterpret_cast<float4*>(st)[2 * threadIdx.x + 1] = make_float4(s[4], s[5], s[6], s[7]);
  });
}
// Whether it takes these: eight columns a thread and 16-byte accesses. Where not (an odd d, a
// tensor at an offset not a multiple of 8 values), gelu_backward_act_in_flight runs
// gelu_backward_act_kernel.
inline bool gelu_in_flight_fits(const void* g, const void* h, const void* act, int cols) {
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return cols % 8 == 0 && aligned(g) && aligned(h) && aligned(act);
}
// x covers the columns (cols / 8 a row, a thread each), y as many row strides as keep about 1024
// blocks of 128 threads in flight (8 an SM on 132). The kernel alone on an H200, L2 flushed, at
// GPT-2 small's 4096 x 3072: 34.1 us with 1056 blocks, 35.2 with 528; gelu_backward_act_kernel 41.9.
inline dim3 gelu_in_flight_grid(std::size_t rows, int cols8) {
  const unsigned x = static_cast<unsigned>((cols8 + kInFlightThreads - 1) / kInFlightThreads);
  const std::size_t strides = (rows + kInFlightRows - 1) / kInFlightRows;
  const unsigned y = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(strides, 1024 / x)));
  return {x, y};
}
// GELU's backward with GELU's output, as gelu_backward_act_kernel's contract (g: dact in, dh out;
// cols = 4 d), by the kernel above where it fits, else by that kernel.
inline void gelu_backward_act_in_flight(__nv_bfloat16* g, const __nv_bfloat16* h, __nv_bfloat16* act, float* db,
                                        std::size_t rows, int cols, cudaStream_t stream) {
  if (gelu_in_flight_fits(g, h, act, cols))
    gelu_backward_act_in_flight_kernel<<<gelu_in_flight_grid(rows, cols / 8), kInFlightThreads, 0, stream>>>(
        g, h, act, db, rows, cols / 8);
  else
    gelu_backward_act_kernel<__nv_bfloat16, __nv_bfloat16>
        <<<column_owner_grid(rows, cols / 4), kThreads, 0, stream>>>(g, h, act, db, rows, cols / 4);
  LAB_CHECK(cudaGetLastError());
}

// The loss a row, and with Backward its gradient in the logits' place: one pass keeps a running
// (max, sum of exp) per thread, the block combines them (lse = max + log sum), the target's owner
// writes the row's loss lse - z[target], and a second pass writes (softmax - onehot) / rows, the
// softmax as exp(z - max) / sum, into dz in Grad (the products' type for dY). The logits z are in Z,
// fp32 or bf16 (a head product that writes them in bf16, as autocast's does), read as fp32; dz may be
// z itself (Z = Grad: in place), each element read before the thread that owns it writes it.
struct MaxSum {  // as eager attention's softmax (attention_eager.cu), with expf: the loss's accuracy
  float m, s;
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
template <bool Backward, class Grad = float, class Z = float>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(Z* z, const std::int32_t* __restrict__ targets, float* __restrict__ losses, int vocab,
                         float inv_rows, Grad* dz = nullptr) {
  const std::size_t row = blockIdx.x;
  Z* zr = z + row * vocab;
  const int target = targets[row];
  MaxSum t{-INFINITY, 0.f};
  for (int j = threadIdx.x; j < vocab; j += kThreads) t = combine(t, MaxSum{as_float(zr[j]), 1.f});
  for (int o = 16; o > 0; o /= 2) t = combine(t, MaxSum{__shfl_xor_sync(~0u, t.m, o), __shfl_xor_sync(~0u, t.s, o)});
  __shared__ MaxSum warps[kThreads / 32];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = t;
  __syncthreads();
  MaxSum all = warps[0];
  for (int w = 1; w < kThreads / 32; ++w) all = combine(all, warps[w]);
  if (threadIdx.x == target % kThreads) losses[row] = all.m + logf(all.s) - as_float(zr[target]);
  if constexpr (Backward) {
    const float inv_s = 1.f / all.s;
    Grad* dzr = dz + row * vocab;
    for (int j = threadIdx.x; j < vocab; j += kThreads)
      dzr[j] = to<Grad>((expf(as_float(zr[j]) - all.m) * inv_s - (j == target ? 1.f : 0.f)) * inv_rows);
  }
}

// cross_entropy_kernel with the row held in registers, for vocabularies up to 16 x 1024: a block of
// 1024 threads a row, Items logits a thread, so the logits are read once where cross_entropy_kernel
// reads them twice (its running max and sum, then the gradient's pass). At small, vocabulary
// 10000, that is 164 MB of fp32 logits a step not read again. Z and dz as cross_entropy_kernel's.
// The max first, then the sum of exp(z - max) over the row (the reference's own order of
// operations: no running rescale).
constexpr int kRowThreads = 1024;
template <int Items, bool Backward, class Grad = float, class Z = float>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_rows_kernel(Z* z, const std::int32_t* __restrict__ targets, float* __restrict__ losses,
                              int vocab, float inv_rows, Grad* dz = nullptr) {
  const std::size_t row = blockIdx.x;
  Z* zr = z + row * vocab;
  const int target = targets[row];
  float v[Items], m = -INFINITY;
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    const int j = threadIdx.x + k * kRowThreads;
    v[k] = j < vocab ? as_float(zr[j]) : -INFINITY;
    m = fmaxf(m, v[k]);
  }
  const float mx = blockwide::max<kRowThreads>(m);
  float s = 0;
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    v[k] = threadIdx.x + k * kRowThreads < vocab ? expf(v[k] - mx) : 0.f;  // the logit's place now holds its exp
    s += v[k];
  }
  const float total = blockwide::sum<kRowThreads>(s);
  if (threadIdx.x == target % kRowThreads) losses[row] = mx + logf(total) - as_float(zr[target]);
  if constexpr (Backward) {
    __syncthreads();  // every read of the row done before dz (in place: z itself) is written
    const float inv_s = 1.f / total;
    Grad* dzr = dz + row * vocab;
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int j = threadIdx.x + k * kRowThreads;
      if (j < vocab) dzr[j] = to<Grad>((v[k] * inv_s - (j == target ? 1.f : 0.f)) * inv_rows);
    }
  }
}

// Calls f(std::integral_constant<int, Items>{}) with the fewest items a thread (1, 2, 4, 8 or 16)
// that hold a row of `vocab` logits in cross_entropy_rows_kernel's kRowThreads threads, and returns
// true; false (f not called) for a longer row, which cross_entropy_kernel takes.
template <class F>
bool with_row_items(int vocab, F&& f) {
  if (vocab <= kRowThreads) f(std::integral_constant<int, 1>{});
  else if (vocab <= 2 * kRowThreads) f(std::integral_constant<int, 2>{});
  else if (vocab <= 4 * kRowThreads) f(std::integral_constant<int, 4>{});
  else if (vocab <= 8 * kRowThreads) f(std::integral_constant<int, 8>{});
  else if (vocab <= 16 * kRowThreads) f(std::integral_constant<int, 16>{});
  else return false;
  return true;
}

// cross_entropy_rows_kernel for bf16 logits past 16 x 1024 classes (GPT-2's padded vocabulary,
// 50304): the row held in registers as it arrives, two logits a 32-bit register (Pairs of them a
// thread: 2 x Pairs x 1024 classes a row), so the row is read once where cross_entropy_kernel
// reads it twice. At 50304 classes and 4096 rows that is 412 MB a step not read again. Its fp32
// exponentials would not fit beside the row (50 registers more a thread), so they are made twice:
// for the sum, and again for the gradient (expf gives the same value both times). The arithmetic is
// cross_entropy_rows_kernel's: the max, the sum of expf(z - max), the target's loss, the gradient
// (expf(z - max) / sum - onehot) / rows written over the logits in bf16. An even vocabulary (a row's
// pairs 4-byte aligned) up to 57344: with_row_pairs says which.
template <int Pairs, bool Backward>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_pairs_kernel(__nv_bfloat16* z, const std::int32_t* __restrict__ targets, float* __restrict__ losses,
                               int vocab, float inv_rows, __nv_bfloat16* dz = nullptr) {
  const std::size_t row = blockIdx.x;
  const int pairs = vocab / 2;
  const __nv_bfloat162* zr = reinterpret_cast<const __nv_bfloat162*>(z + row * vocab);
  const int target = targets[row];
  __nv_bfloat162 raw[Pairs];  // the registers hold the bf16 pairs, unpacked to fp32 as they are used
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < Pairs; ++k) {
    const int j = threadIdx.x + k * kRowThreads;
    raw[k] = j < pairs ? zr[j] : __floats2bfloat162_rn(-INFINITY, -INFINITY);
    const float2 t = __bfloat1622float2(raw[k]);
    m = fmaxf(m, fmaxf(t.x, t.y));
  }
  const float mx = blockwide::max<kRowThreads>(m);
  float s = 0;
#pragma unroll
  for (int k = 0; k < Pairs; ++k) {
    const float2 t = __bfloat1622float2(raw[k]);  // -inf past the row: expf gives 0
    s += expf(t.x - mx);
    s += expf(t.y - mx);
  }
  const float total = blockwide::sum<kRowThreads>(s);
  if (threadIdx.x == (target / 2) % kRowThreads)
    losses[row] = mx + logf(total) - __bfloat162float(z[row * vocab + target]);
  if constexpr (Backward) {
    __syncthreads();  // every read of the row done before dz (in place: z itself) is written
    const float inv_s = 1.f / total;
    __nv_bfloat162* dzr = reinterpret_cast<__nv_bfloat162*>(dz + row * vocab);
#pragma unroll
    for (int k = 0; k < Pairs; ++k) {
      const int j = threadIdx.x + k * kRowThreads;
      if (j < pairs) {
        const float2 t = __bfloat1622float2(raw[k]);
        dzr[j] = __floats2bfloat162_rn((expf(t.x - mx) * inv_s - (2 * j == target ? 1.f : 0.f)) * inv_rows,
                                       (expf(t.y - mx) * inv_s - (2 * j + 1 == target ? 1.f : 0.f)) * inv_rows);
      }
    }
  }
}

// Calls f(std::integral_constant<int, Pairs>{}) with the fewest pairs a thread (16, 20, 24 or 28)
// that hold a row of `vocab` bf16 logits in cross_entropy_pairs_kernel's kRowThreads threads, and
// returns true; false (f not called) for an odd vocabulary or one past 57344. (28 pairs a thread
// fit the 64 registers that 1024 threads a block leave each; ptxas spills at 32.)
template <class F>
bool with_row_pairs(int vocab, F&& f) {
  if (vocab % 2 != 0) return false;
  const int per_pairs = 2 * kRowThreads;
  if (vocab <= 16 * per_pairs) f(std::integral_constant<int, 16>{});
  else if (vocab <= 20 * per_pairs) f(std::integral_constant<int, 20>{});
  else if (vocab <= 24 * per_pairs) f(std::integral_constant<int, 24>{});
  else if (vocab <= 28 * per_pairs) f(std::integral_constant<int, 28>{});
  else return false;
  return true;
}

// cross_entropy_rows_kernel for bf16 logits with more bytes in flight
// (optimized_gpt2_step_fused_bf16_loss_in_flight.cu tells the lesson). That kernel gives a row 1024
// threads, each loading its Items logits 2 bytes at a time (a warp's load 64 bytes); at 64
// registers a thread its block fills an SM's register file, so an SM holds one row, and while the
// row waits at its two block-wide reductions, no load of the next row is in flight (the H200 moved
// about 1.2 TB/s through it at GPT-2 small, vocabulary 10000). Here a row has kVecRowThreads (256)
// threads, each issuing its Vecs 16-byte loads (8 logits each) before it unpacks the first, and an
// SM holds several rows, so one row's reductions overlap the others' loads.
// The arithmetic is cross_entropy_rows_kernel's: the max, the sum of expf(z - max) (the
// exponentials kept in registers in the logits' place), the target's loss, the gradient
// (expf(z - max) / sum - onehot) / rows written over the logits in bf16; only the sum's order
// differs. A vocabulary that is a multiple of 8 (a row's vectors 16-byte aligned) up to 8 x 8 x 256
// = 16384 classes: with_row_vecs says which.
constexpr int kVecRowThreads = 256;
template <int Vecs, bool Backward>
__global__ void __launch_bounds__(kVecRowThreads)
    cross_entropy_vecs_kernel(__nv_bfloat16* z, const std::int32_t* __restrict__ targets, float* __restrict__ losses,
                              int vocab, float inv_rows, __nv_bfloat16* dz = nullptr) {
  const std::size_t row = blockIdx.x;
  const int vecs = vocab / 8;
  const uint4* zr = reinterpret_cast<const uint4*>(z + row * vocab);
  const int target = targets[row];
  uint4 raw[Vecs];  // every load issued before the first is unpacked
#pragma unroll
  for (int k = 0; k < Vecs; ++k) {
    const int j = threadIdx.x + k * kVecRowThreads;
    raw[k] = j < vecs ? zr[j] : make_uint4(0u, 0u, 0u, 0u);
  }
  float v[8 * Vecs], m = -INFINITY;
#pragma unroll
  for (int k = 0; k < Vecs; ++k) {
    const bool in = threadIdx.x + k * kVecRowThreads < vecs;
    const unsigned u[4] = {raw[k].x, raw[k].y, raw[k].z, raw[k].w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 t = bf16_pair(u[q]);
      v[8 * k + 2 * q] = in ? t.x : -INFINITY, v[8 * k + 2 * q + 1] = in ? t.y : -INFINITY;
      m = fmaxf(m, fmaxf(v[8 * k + 2 * q], v[8 * k + 2 * q + 1]));
    }
  }
  const float mx = blockwide::max<kVecRowThreads>(m);
  float s = 0;
#pragma unroll
  for (int i = 0; i < 8 * Vecs; ++i) {
    v[i] = expf(v[i] - mx);  // the logit's place now holds its exp (-inf past the row: 0)
    s += v[i];
  }
  const float total = blockwide::sum<kVecRowThreads>(s);
  if (threadIdx.x == (target / 8) % kVecRowThreads)
    losses[row] = mx + logf(total) - __bfloat162float(z[row * vocab + target]);
  if constexpr (Backward) {
    __syncthreads();  // every read of the row done before dz (in place: z itself) is written
    const float inv_s = 1.f / total;
    uint4* dzr = reinterpret_cast<uint4*>(dz + row * vocab);
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      const int j = threadIdx.x + k * kVecRowThreads;
      if (j < vecs) {
        unsigned o[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int c = 8 * j + 2 * q;
          o[q] = bf16_pack((v[8 * k + 2 * q] * inv_s - (c == target ? 1.f : 0.f)) * inv_rows,
                           (v[8 * k + 2 * q + 1] * inv_s - (c + 1 == target ? 1.f : 0.f)) * inv_rows);
        }
        dzr[j] = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
  }
}

// Calls f(std::integral_constant<int, Vecs>{}) with the fewest 16-byte vectors a thread (1 to 6,
// or 8) that hold a row of `vocab` bf16 logits in cross_entropy_vecs_kernel's kVecRowThreads
// threads, and returns true; false (f not called) for a vocabulary not a multiple of 8, one past
// 16384, or logits not 16-byte aligned.
template <class F>
bool with_row_vecs(int vocab, const void* z, F&& f) {
  if (vocab % 8 != 0 || reinterpret_cast<std::uintptr_t>(z) % 16 != 0) return false;
  const int per_vec = 8 * kVecRowThreads, n = (vocab + per_vec - 1) / per_vec;
  switch (n) {
    case 1: f(std::integral_constant<int, 1>{}); return true;
    case 2: f(std::integral_constant<int, 2>{}); return true;
    case 3: f(std::integral_constant<int, 3>{}); return true;
    case 4: f(std::integral_constant<int, 4>{}); return true;
    case 5: f(std::integral_constant<int, 5>{}); return true;
    case 6: f(std::integral_constant<int, 6>{}); return true;
    case 7:
    case 8: f(std::integral_constant<int, 8>{}); return true;
    default: return false;
  }
}

// loss = the mean of the rows' losses: one block.
__global__ void mean_kernel(const float* __restrict__ losses, float* __restrict__ loss, std::size_t rows) {
  float s = 0;
  for (std::size_t r = threadIdx.x; r < rows; r += kThreads) s += losses[r];
  s = blockwide::sum<kThreads>(s);
  if (threadIdx.x == 0) loss[0] = s / float(rows);
}

// Q, K, V or O by head, padded to the flash width: B h T dp values.
std::size_t heads_size(const gpt2::Config& c) { return c.tokens() * c.heads * flash_width(c.head_dim()); }

}  // namespace
