// The fused GPT-2 step's machinery, shared by its variant files: every kernel and the step's
// schedule (FusedStep), with the linear layers' matrix products left to a Products class that each
// file supplies (Sgemm below, cuBLAS fp32, for optimized_gpt2_step_fused.cu and
// optimized_gpt2_step_fused_tc_attention.cu; optimized_gpt2_step_fused_3xtf32.cu: fp32 accuracy on
// the tensor cores; optimized_gpt2_step_fused_bf16.cu: bf16 operands), and the attention to an
// Attention class. What each kernel fuses, and why it is faster than the vanilla step's chain of
// kernels, is said where it is defined.
//
// A Products class has
//   static constexpr const char* kPrecision: its arithmetic, as lab::Declared::precision names it;
//   using Operand = float or __nv_bfloat16 (float when absent): the type its products read their
//        operands in. The kernels that make the activations (the LayerNorms' outputs, the merged
//        attention, GELU's output, and its input, the MLP's pre-activation) write them in that
//        type, and the step saves them in it. The weights, in fp32 in the parameters, are
//        rounded into a copy when the type is not float:
//        a block's at the start of its forward, into memory kept with its saved tensors (so, at
//        scale, in the gradients' buffer: no memory of its own), read by its forward and backward;
//   Products(const gpt2::Config&, gpt2::Phase): its scratch, made in the variant's prepare step;
//   void linear(cublasHandle_t, const Operand* X, const Operand* W, float* Y, int M, int N, int K,
//               cudaStream_t): Y (M x N) = X (M x K) W^T, nn.Linear without its bias;
//   void linear_backward(cublasHandle_t, const float* dY, const Operand* X, const Operand* W,
//                        float* dX, float* dW, float* db, int M, int N, int K, cudaStream_t):
//        dX = dY W, dW = dY^T X and db = the column sums of dY (none when db is null), all written;
//   optionally head(...) and head_backward(...): the same for the head's products (the
//        vocabulary's), where they differ from linear's.
// Everything it launches goes on the stream it is given (cuBLAS: the handle's stream), so that the
// step is captured as one CUDA graph.
//
// The attention is a second such class, FlashFp32 below unless the file gives another
// (optimized_gpt2_step_fused_tc_attention.cu: the same algorithm on the tensor cores). It has
//   static constexpr const char* kPrecision: its products' arithmetic ("fp32", "3xtf32", "bf16");
//   using Operand (float when absent): the type of the Q, K, V and dO heads it reads, which the
//        step lays out (and saves) in that type;
//   a constructor from (const gpt2::Config&, gpt2::Phase): its scratch, if it needs any;
//   void forward(q, k, v, o, lse, bh, seq, d, causal, scale, stream) and
//   void backward(q, k, v, dout, lse, delta, dq, dk, dv, bh, seq, d, causal, scale, stream):
//        flash_fp32.cuh's forward and backward (o, lse, dq, dk, dv in fp32; dq added to: zeroed
//        before).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "block_reduce.cuh"
#include "flash_fp32.cuh"
#include "flat_adamw.cuh"
#include "gpt2.cuh"
#include "gpt2_eager.cuh"
#include "lab/launch.hpp"

namespace {

namespace ops = gpt2::eager;
using Buffer = lab::DeviceBuffer<float>;

constexpr int kThreads = 256;
constexpr int kMaxItems = 16;  // a row of up to 16 x 256 = 4096 floats in registers

// The type a Products or Attention class reads its activations in: its Operand, float when absent.
template <class T>
struct operand_of {
  using type = float;
};
template <class T>
  requires requires { typename T::Operand; }
struct operand_of<T> {
  using type = typename T::Operand;
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

// Calls f(std::integral_constant<int, Items>{}) with the fewest items a thread that cover d.
template <class F>
void with_items(int d, F&& f) {
  if (d <= kThreads) return f(std::integral_constant<int, 1>{});
  if (d <= 2 * kThreads) return f(std::integral_constant<int, 2>{});
  if (d <= 4 * kThreads) return f(std::integral_constant<int, 4>{});
  if (d <= 8 * kThreads) return f(std::integral_constant<int, 8>{});
  f(std::integral_constant<int, kMaxItems>{});
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
template <class T>
__global__ void round_kernel(const float* __restrict__ x, T* __restrict__ y, std::size_t n) {
  for (std::size_t i : lab::grid_stride(n)) y[i] = to<T>(x[i]);
}

// ln = LayerNorm(x) again from the mean and rstd the forward kept, for the backward: the forward's
// expression on the same fp32 values, so the same output (a block a row).
template <class Out>
__global__ void __launch_bounds__(kThreads)
    layer_norm_again_kernel(const float* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd,
                            const float* __restrict__ w, const float* __restrict__ b, Out* __restrict__ ln, int d) {
  const std::size_t off = std::size_t(blockIdx.x) * d;
  const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
  for (int j = threadIdx.x; j < d; j += kThreads) ln[off + j] = to<Out>((x[off + j] - mu) * rs * w[j] + b[j]);
}

// The LayerNorm backward: dres += dx (or = dx when !accumulate), dx = rstd (g - mean(g) - xhat
// mean(g xhat)) with g = dy w; and dw += sum dy xhat, db += sum dy over the block's rows, kept in
// registers across its rows and added atomically once (dw, db zeroed before).
template <int Items>
__global__ void __launch_bounds__(kThreads)
    layer_norm_backward_kernel(const float* __restrict__ dy, const float* __restrict__ x, const float* __restrict__ w,
                               const float* __restrict__ mean, const float* __restrict__ rstd, float* dres, float* dw,
                               float* db, std::size_t rows, int d, bool accumulate) {
  float wj[Items], aw[Items] = {}, ab[Items] = {};
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    const int j = threadIdx.x + k * kThreads;
    wj[k] = j < d ? w[j] : 0.f;
  }
  for (std::size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::size_t off = row * d;
    const float mu = mean[row], rs = rstd[row];
    float g[Items], xh[Items], sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int j = threadIdx.x + k * kThreads;
      g[k] = 0, xh[k] = 0;
      if (j < d) {
        const float dyj = dy[off + j];
        xh[k] = (x[off + j] - mu) * rs;
        g[k] = dyj * wj[k];
        aw[k] += dyj * xh[k];
        ab[k] += dyj;
      }
      sg += g[k];
      sgx += g[k] * xh[k];
    }
    const float mean_g = blockwide::sum<kThreads>(sg) * (1.f / d);
    const float mean_gx = blockwide::sum<kThreads>(sgx) * (1.f / d);
#pragma unroll
    for (int k = 0; k < Items; ++k) {
      const int j = threadIdx.x + k * kThreads;
      if (j >= d) continue;
      const float dx = rs * (g[k] - mean_g - xh[k] * mean_gx);
      dres[off + j] = accumulate ? dres[off + j] + dx : dx;
    }
  }
#pragma unroll
  for (int k = 0; k < Items; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j < d) atomicAdd(&dw[j], aw[k]), atomicAdd(&db[j], ab[k]);
  }
}

// The heads' layout: element i of a (B, h, T, dp) tensor, dp >= hd the width the flash kernels
// take, is column head hd + c of row b T + t when c < hd, and padding (zero) when c >= hd.
struct HeadIndex {
  std::size_t row, col;
  bool real;
  __device__ HeadIndex(std::size_t i, int context, int h, int hd, int dp) {
    const std::size_t c = i % dp, t = i / dp % context, bh = i / (std::size_t(dp) * context);
    row = bh / h * context + t;
    col = bh % h * hd + c;
    real = c < std::size_t(hd);
  }
};

// Q, K, V by head from the QKV product's rows (B T x 3d), each plus its bias, in the type the
// attention reads (T); zeros in the padding.
template <class T>
__global__ void qkv_heads_kernel(const float* __restrict__ qkv, const float* __restrict__ bias, T* __restrict__ q,
                                 T* __restrict__ k, T* __restrict__ v, std::size_t n, int context, int h, int hd,
                                 int dp) {
  const int d = h * hd;
  for (std::size_t i : lab::grid_stride(n)) {
    const HeadIndex at(i, context, h, hd, dp);
    if (!at.real) {
      q[i] = to<T>(0.f), k[i] = to<T>(0.f), v[i] = to<T>(0.f);
      continue;
    }
    const float* r = qkv + at.row * 3 * d + at.col;
    q[i] = to<T>(r[0] + bias[at.col]);
    k[i] = to<T>(r[d] + bias[d + at.col]);
    v[i] = to<T>(r[2 * d] + bias[2 * d + at.col]);
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

// The width the flash kernels take for a head of hd: 16, 32, 64 or 128 (0: none, hd > 128).
constexpr int flash_width(int hd) {
  for (int w : {16, 32, 64, 128})
    if (hd <= w) return w;
  return 0;
}

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }

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

// act = gelu(h) again, for the backward: the same values the forward's pass wrote.
template <class T>
__global__ void gelu_kernel(const T* __restrict__ h, T* __restrict__ act, std::size_t n4) {
  for (std::size_t i : lab::grid_stride(n4)) {
    const float4 t = load4(h + 4 * i);
    store4(act + 4 * i, make_float4(gelu(t.x), gelu(t.y), gelu(t.z), gelu(t.w)));
  }
}

// g *= gelu'(h), in place: the gradient of the MLP's output becomes its pre-activation's.
template <class T>
__global__ void gelu_backward_kernel(float4* g, const T* __restrict__ h, std::size_t n4) {
  auto dgelu = [](float x) {  // as the vanilla step's (gpt2_eager.cu)
    const float cdf = 0.5f * (1.f + erff(x * 0.70710678118654752f));
    const float pdf = expf(-0.5f * x * x) * 0.39894228040143268f;
    return cdf + x * pdf;
  };
  for (std::size_t i : lab::grid_stride(n4)) {
    float4 d = g[i];
    const float4 t = load4(h + 4 * i);
    d.x *= dgelu(t.x), d.y *= dgelu(t.y), d.z *= dgelu(t.z), d.w *= dgelu(t.w);
    g[i] = d;
  }
}

// The loss a row, and with Backward its gradient in the logits' place: one pass keeps a running
// (max, sum of exp) per thread, the block combines them (lse = max + log sum), the target's owner
// writes the row's loss lse - z[target], and a second pass writes (softmax - onehot) / rows, the
// softmax as exp(z - max) / sum.
struct MaxSum {  // as eager attention's softmax (attention_eager.cu), with expf: the loss's accuracy
  float m, s;
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
template <bool Backward>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(float* z, const std::int32_t* __restrict__ targets, float* __restrict__ losses, int vocab,
                         float inv_rows) {
  const std::size_t row = blockIdx.x;
  float* zr = z + row * vocab;
  const int target = targets[row];
  MaxSum t{-INFINITY, 0.f};
  for (int j = threadIdx.x; j < vocab; j += kThreads) t = combine(t, MaxSum{zr[j], 1.f});
  for (int o = 16; o > 0; o /= 2) t = combine(t, MaxSum{__shfl_xor_sync(~0u, t.m, o), __shfl_xor_sync(~0u, t.s, o)});
  __shared__ MaxSum warps[kThreads / 32];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = t;
  __syncthreads();
  MaxSum all = warps[0];
  for (int w = 1; w < kThreads / 32; ++w) all = combine(all, warps[w]);
  if (threadIdx.x == target % kThreads) losses[row] = all.m + logf(all.s) - zr[target];
  if constexpr (Backward) {
    const float inv_s = 1.f / all.s;
    for (int j = threadIdx.x; j < vocab; j += kThreads)
      zr[j] = (expf(zr[j] - all.m) * inv_s - (j == target ? 1.f : 0.f)) * inv_rows;
  }
}

// loss = the mean of the rows' losses: one block.
__global__ void mean_kernel(const float* __restrict__ losses, float* __restrict__ loss, std::size_t rows) {
  float s = 0;
  for (std::size_t r = threadIdx.x; r < rows; r += kThreads) s += losses[r];
  s = blockwide::sum<kThreads>(s);
  if (threadIdx.x == 0) loss[0] = s / float(rows);
}

unsigned blocks_for(std::size_t work) { return lab::grid_for(work, kThreads); }

// Q, K, V or O by head, padded to the flash width: B h T dp values.
std::size_t heads_size(const gpt2::Config& c) { return c.tokens() * c.heads * flash_width(c.head_dim()); }

// Tensors carved one after another from memory at `at` (null: only counting), each 256-byte aligned;
// `used` counts floats (the gradients' buffer, where most of them lie, is in floats).
struct Carver {
  float* at;
  std::size_t used = 0;
  template <class T = float>
  T* take(std::size_t n) {
    T* p = at ? reinterpret_cast<T*>(at + used) : nullptr;
    used += (n * sizeof(T) + 255) / 256 * 64;
    return p;
  }
};

// What one block keeps for its backward: no T x T tensor; the log-sum-exp of each head row instead.
// Q, K, V by head, heads padded to the flash width, in the attention's type (A); the merged
// attention output, a product's operand, and the MLP's pre-activation (4 d values a token, the
// largest tensor kept), in the products' type (P); the residual stream (both LayerNorms' inputs)
// with their means and rstds in fp32. Not kept: the LayerNorms' outputs and GELU's, which the
// backward makes again from these (the same values, in one pass each that reads no more than it
// would read back: cheaper than keeping them, in memory, and no slower). Carved from memory the
// step places (see FusedStep::place_saved).
template <class P, class A>
struct Saved {
  float *x, *mean1, *rstd1, *lse, *mid, *mean2, *rstd2;
  P *att, *h, *w;  // w: the block's parameters in P, when P is not float (null when it is)
  A *q, *k, *v;
  Saved(const gpt2::Config& c, Carver& m) {
    const std::size_t n = c.tokens() * c.d, t = c.tokens(), nh = heads_size(c);
    w = std::is_same_v<P, float> ? nullptr : m.take<P>(gpt2::stage_begin(c, 1) - gpt2::stage_begin(c, 0));
    x = m.take(n), mean1 = m.take(t), rstd1 = m.take(t);
    q = m.take<A>(nh), k = m.take<A>(nh), v = m.take<A>(nh), lse = m.take(t * c.heads), att = m.take<P>(n);
    mid = m.take(n), mean2 = m.take(t), rstd2 = m.take(t), h = m.take<P>(4 * n);
  }
  static std::size_t floats(const gpt2::Config& c) {
    Carver m{nullptr};
    static_cast<void>(Saved(c, m));
    return m.used;
  }
};

// What the head keeps: the last block's output (the final LayerNorm's input, its output made again
// as a block's are), the logits (which the loss kernel overwrites with their gradient), and its
// stage's parameters in P when P is not float.
template <class P>
struct HeadSaved {
  float *out = nullptr, *meanf = nullptr, *rstdf = nullptr, *logits = nullptr;
  P* w = nullptr;
  HeadSaved() = default;
  HeadSaved(const gpt2::Config& c, Carver& m) {
    const std::size_t n = c.tokens() * c.d, t = c.tokens();
    if (!std::is_same_v<P, float>) w = m.take<P>(gpt2::param_count(c) - gpt2::stage_begin(c, c.layers));
    out = m.take(n), meanf = m.take(t), rstdf = m.take(t), logits = m.take(t * c.vocab);
  }
  static std::size_t floats(const gpt2::Config& c) {
    Carver m{nullptr};
    static_cast<void>(HeadSaved(c, m));
    return m.used;
  }
};

// The products as the vanilla step runs them: cuBLAS SGEMM (fp32 FMA on the SIMT units).
struct Sgemm {
  static constexpr const char* kPrecision = "fp32";
  Sgemm(const gpt2::Config&, gpt2::Phase) {}
  void linear(cublasHandle_t blas, const float* X, const float* W, float* Y, int M, int N, int K, cudaStream_t) {
    ops::linear(blas, X, W, Y, M, N, K);
  }
  void linear_backward(cublasHandle_t blas, const float* dY, const float* X, const float* W, float* dX, float* dW,
                       float* db, int M, int N, int K, cudaStream_t stream) {
    ops::linear_backward(blas, dY, X, W, dX, dW, db, M, N, K, stream);
  }
};

// The chapter's fp32 flash attention on the SIMT units (flash_fp32.cuh).
struct FlashFp32 {
  static constexpr const char* kPrecision = "fp32";
  FlashFp32(const gpt2::Config&, gpt2::Phase) {}
  static constexpr auto forward = flash::forward;
  static constexpr auto backward = flash::backward;
};

template <class Products, class Attention = FlashFp32>
struct FusedStep {
  using Topic = Gpt2Step;
  gpt2::Config c;
  gpt2::Phase phase;
  gpt2::Offsets off;
  int rows, d, hd, dp;  // dp: the heads' width in the flash kernels (hd, or hd padded with zeros)
  lab::CublasHandle blas;
  lab::DeviceBuffer<std::uint8_t> blas_workspace;  // cuBLAS's, set explicitly: a graph may not allocate
  using Op = typename operand_of<Products>::type;       // the products' activations: float or bf16
  using HeadOp = typename operand_of<Attention>::type;  // the attention's Q, K, V, dO
  using Block = Saved<Op, HeadOp>;
  std::vector<Block> blocks;  // every block's saved tensors (the forward alone: one block's, reused)
  HeadSaved<Op> head;
  Buffer spill;  // the saved tensors that the gradients' buffer cannot take (see place_saved)
  Buffer losses, coef;
  Buffer qkv, o, tmp;           // forward scratch; the backward's dQKV lies in qkv
  lab::DeviceBuffer<Op> ln, act;  // a LayerNorm's output and GELU's: made by the forward, and by the backward again
  Buffer dx, dln, delta, wide;  // backward scratch; wide: dact (dh in place), later dq, dk, dv; in
                                // the forward, the MLP's first product when h is kept in bf16
  lab::DeviceBuffer<HeadOp> dout;
  Products products;    // the linear layers' matrix products: the variant file's
  Attention attention;  // the flash attention: FlashFp32, or the variant file's
  // The step runs on `lead`, at the device's highest priority; AdamW runs on `side`, at its lowest,
  // a stage at a time as soon as the backward has finished that stage's gradients (see step()).
  lab::Stream lead{priority(true)}, side{priority(false)};
  std::deque<lab::Event> forks;  // the points where one stream waits for another
  lab::GraphExec graph;

  static int priority(bool highest) {
    int least = 0, greatest = 0;
    LAB_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return highest ? greatest : least;
  }

  // The products' arithmetic, and the attention's where it differs ("fp32+3xtf32-attention"):
  // gpt2::ModelOptions::for_precision reads both.
  static lab::Declared declared() {
    const std::string attention = Attention::kPrecision;
    if (attention == "fp32") return {.precision = Products::kPrecision};
    return {.precision = std::string(Products::kPrecision) + "+" + attention + "-attention"};
  }

  static std::string supports(const lab::Shape& s, const lab::DeviceFacts&) {
    const gpt2::Config c = gpt2::config_of(s);
    const int hd = c.head_dim();
    if (flash_width(hd) == 0) return "the flash kernels take head sizes up to 128, not " + std::to_string(hd);
    if (c.d > kMaxItems * kThreads) return "the row kernels hold d_model <= 4096 in registers";
    return "";
  }

  FusedStep(Gpt2Step::Problem& p, cudaStream_t stream)
      : c(p.cfg), phase(p.phase), off(gpt2::offsets(c)), rows(int(c.tokens())), d(c.d), hd(c.head_dim()),
        dp(flash_width(hd)), blas_workspace(std::size_t(32) << 20), losses(rows), coef(2), qkv(3 * c.tokens() * d),
        o(heads_size(c)), tmp(c.tokens() * d), ln(c.tokens() * d), act(4 * c.tokens() * d), products(c, phase), attention(c, phase) {
    place_saved(p);
    const std::size_t n = c.tokens() * d, nh = heads_size(c);
    if (phase != gpt2::Phase::forward) {
      dx = Buffer(n), dln = Buffer(n), delta = Buffer(c.tokens() * c.heads), dout = lab::DeviceBuffer<HeadOp>(nh);
      wide = Buffer(std::max(4 * n, 3 * nh));
    } else if (kCopies) {
      wide = Buffer(4 * n);
    }
    ops::use_stream(blas, lead);
    LAB_CHECK(cublasSetWorkspace(blas, blas_workspace.data(), blas_workspace.size()));
    graph.capture(
        stream,
        [&] {
          wait(lead, stream);
          step(p, lead);
          wait(stream, lead);
        },
        cudaGraphInstantiateFlagUseNodePriority);
  }

  // `later` waits for what `earlier` has launched so far (in a capture: an edge of the graph).
  void wait(cudaStream_t later, cudaStream_t earlier) {
    forks.emplace_back().record(earlier);
    LAB_CHECK(cudaStreamWaitEvent(later, forks.back()));
  }

  void run(Gpt2Step::Problem& p, cudaStream_t stream) {
    if (phase == gpt2::Phase::step) {
      // The step's bias corrections, from pageable memory: staged before the call returns.
      const auto at = flat_adamw::Coef::at_step(p.hp.lr, p.hp.beta1, p.hp.beta2, p.step);
      const std::array<float, 2> host{at.step_size, at.inv_sqrt_bc2};
      LAB_CHECK(cudaMemcpyAsync(coef.data(), host.data(), sizeof(host), cudaMemcpyHostToDevice, stream));
    }
    graph.launch(stream);
  }

  // The saved tensors' memory. The forward alone keeps one block's and the head's, in a buffer of
  // their own. With a backward, every block's and the head's are kept, in the gradients' buffer
  // wherever gpt2::plan_saved finds room: the part of it that the backward has not yet written
  // when they are read (a block's saved tensors below the block's own gradients, in those of the
  // blocks before it and the embeddings'). At xl and context 256 that is every block but the first,
  // 4.5 GB the step no longer allocates; what has no room there (the small model at context 1024:
  // most of it) is spilled into a buffer of its own. The backward's kernels then write a block's
  // gradients over the saved tensors of the blocks after it, which they have finished with.
  void place_saved(Gpt2Step::Problem& p) {
    if (phase == gpt2::Phase::forward) {
      spill = Buffer(Block::floats(c) + HeadSaved<Op>::floats(c));
      Carver m{spill.data()};
      blocks.emplace_back(c, m);
      head = HeadSaved<Op>(c, m);
      return;
    }
    std::vector<std::size_t> floats(c.layers + 1, Block::floats(c));
    floats.back() = HeadSaved<Op>::floats(c);
    const gpt2::SavedPlan plan = gpt2::plan_saved(c, floats);
    spill = Buffer(plan.spill);
    auto at = [&](int stage) {
      const gpt2::SavedPlace& where = plan.stages[stage];
      return (where.in_grads ? p.grads.data() : spill.data()) + where.offset;
    };
    blocks.reserve(c.layers);
    for (int l = 0; l < c.layers; ++l) {
      Carver m{at(l)};
      blocks.emplace_back(c, m);
    }
    Carver m{at(c.layers)};
    head = HeadSaved<Op>(c, m);
  }

  Block& saved(int l) { return blocks[l % blocks.size()]; }

  // A stage's weights as the products read them: the parameters themselves (fp32), or their copy
  // in Op that the forward made at the start of the stage (`copy`, the stage's parameters from
  // `begin` on). round_weights makes that copy (nothing to do in fp32).
  static constexpr bool kCopies = !std::is_same_v<Op, float>;
  const Op* weight(const float* P, std::size_t at, const Op* copy, std::size_t begin) const {
    if constexpr (kCopies) return copy + (at - begin);
    else return P + at;
  }
  void round_weights(const float* P, std::size_t begin, std::size_t end, Op* copy, cudaStream_t stream) {
    if constexpr (kCopies) {
      round_kernel<<<blocks_for(end - begin), kThreads, 0, stream>>>(P + begin, copy, end - begin);
      LAB_CHECK(cudaGetLastError());
    }
  }

  // The head's products: the Products class's own head(), or its linear().
  void head_forward(const Op* X, const Op* W, float* Y, cudaStream_t stream) {
    if constexpr (requires { products.head(blas, X, W, Y, rows, c.vocab, d, stream); })
      products.head(blas, X, W, Y, rows, c.vocab, d, stream);
    else
      products.linear(blas, X, W, Y, rows, c.vocab, d, stream);
  }
  void head_backward(const float* dY, const Op* X, const Op* W, float* dX, float* dW, cudaStream_t stream) {
    if constexpr (requires { products.head_backward(blas, dY, X, W, dX, dW, nullptr, rows, c.vocab, d, stream); })
      products.head_backward(blas, dY, X, W, dX, dW, nullptr, rows, c.vocab, d, stream);
    else
      products.linear_backward(blas, dY, X, W, dX, dW, nullptr, rows, c.vocab, d, stream);
  }

  // (residual +) LayerNorm rows into ln: see residual_layer_norm_kernel.
  void residual_layer_norm(const float* x, const float* y, const float* bias, float* x_out, const float* w,
                           const float* b, Op* ln, float* mean, float* rstd, cudaStream_t stream) {
    with_items(d, [&](auto items) {
      residual_layer_norm_kernel<decltype(items)::value, Op>
          <<<rows, kThreads, 0, stream>>>(x, y, bias, x_out, w, b, ln, mean, rstd, d);
    });
    LAB_CHECK(cudaGetLastError());
  }
  // ln = LayerNorm(x) again, for the backward: see layer_norm_again_kernel.
  void layer_norm_again(const float* x, const float* mean, const float* rstd, const float* w, const float* b,
                        cudaStream_t stream) {
    layer_norm_again_kernel<<<rows, kThreads, 0, stream>>>(x, mean, rstd, w, b, ln.data(), d);
    LAB_CHECK(cudaGetLastError());
  }
  void layer_norm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                           float* dres, float* dw, float* db, bool accumulate, cudaStream_t stream) {
    LAB_CHECK(cudaMemsetAsync(dw, 0, d * sizeof(float), stream));
    LAB_CHECK(cudaMemsetAsync(db, 0, d * sizeof(float), stream));
    const unsigned grid = static_cast<unsigned>(std::min(rows, 512));  // 8 or more rows a block at scale
    with_items(d, [&](auto items) {
      layer_norm_backward_kernel<decltype(items)::value>
          <<<grid, kThreads, 0, stream>>>(dy, x, w, mean, rstd, dres, dw, db, rows, d, accumulate);
    });
    LAB_CHECK(cudaGetLastError());
  }

  // The optimizer overlaps the backward: the backward finishes the gradients a stage at a time (the
  // head's with the final LayerNorm's, then block L-1's down to block 0's, the embeddings' last), and
  // a stage's parameters are read by no later kernel of the step. So AdamW updates each stage on the
  // side stream as soon as its gradients are done, while the lead stream goes on with the blocks
  // below. AdamW is memory-bound and the products are not: at the lowest priority its blocks take
  // what the backward leaves idle (the tails of its waves, its short kernels) instead of a
  // separate pass over 28 bytes a parameter at the end (at xl, 42 GB: 14 ms of the step).
  void step(Gpt2Step::Problem& p, cudaStream_t stream) {
    forward(p, stream);
    if (phase == gpt2::Phase::forward) return;
    const bool update = phase == gpt2::Phase::step;
    backward(p, stream, [&](int stage) {
      if (!update) return;
      const std::size_t begin = gpt2::stage_begin(c, stage);
      const std::size_t end = stage == c.layers ? p.params.size() : gpt2::stage_begin(c, stage + 1);
      wait(side, stream);
      adamw(p, begin, end, side);
    });
    if (!update) return;
    adamw(p, 0, gpt2::stage_begin(c, 0), stream);  // the embeddings, whose gradients come last
    wait(stream, side);
  }
  void adamw(Gpt2Step::Problem& p, std::size_t begin, std::size_t end, cudaStream_t stream) {
    flat_adamw::step(p.params.data(), p.grads.data(), p.m.data(), p.v.data(), begin, end, {.device = coef.data()},
                     flat_adamw::Hyper::of(p.hp.lr, p.hp.beta1, p.hp.beta2, p.hp.eps, p.hp.weight_decay), stream);
  }

  void forward(Gpt2Step::Problem& p, cudaStream_t stream) {
    const float* P = p.params.data();
    Block& s0 = saved(0);
    ops::embedding(P + off.wte, p.tokens.data(), s0.x, rows, d, stream);
    ops::add_positions(s0.x, P + off.wpe, c.batch, c.context, d, stream);
    const gpt2::BlockOffsets& b0 = off.blocks[0];
    residual_layer_norm(s0.x, nullptr, nullptr, s0.x, P + b0.ln1_w, P + b0.ln1_b, ln.data(),
                        s0.mean1, s0.rstd1, stream);
    const std::size_t n = c.tokens() * d;
    const std::size_t nh = o.size();  // Q, K, V, O by head (padded)
    for (int l = 0; l < c.layers; ++l) {
      const gpt2::BlockOffsets& ob = off.blocks[l];
      Block& s = saved(l);
      const std::size_t at = gpt2::stage_begin(c, l);
      auto W = [&](std::size_t offset) { return weight(P, offset, s.w, at); };
      round_weights(P, at, gpt2::stage_begin(c, l + 1), s.w, stream);
      // Attention: the QKV product, its bias while laying Q, K, V out by head, flash attention.
      products.linear(blas, ln.data(), W(ob.qkv_w), qkv.data(), rows, 3 * d, d, stream);
      qkv_heads_kernel<<<blocks_for(nh), kThreads, 0, stream>>>(qkv.data(), P + ob.qkv_b, s.q, s.k,
                                                                s.v, nh, c.context, c.heads, hd, dp);
      LAB_CHECK(cudaGetLastError());
      attention.forward(s.q, s.k, s.v, o.data(), s.lse, c.batch * c.heads, c.context, dp, true,
                        1.f / std::sqrt(float(hd)), stream);
      merge_heads_kernel<<<blocks_for(nh), kThreads, 0, stream>>>(o.data(), s.att, nh, c.context, c.heads, hd, dp);
      LAB_CHECK(cudaGetLastError());
      // The projection; its bias, the residual and LayerNorm 2 in one pass.
      products.linear(blas, s.att, W(ob.proj_w), tmp.data(), rows, d, d, stream);
      residual_layer_norm(s.x, tmp.data(), P + ob.proj_b, s.mid, P + ob.ln2_w, P + ob.ln2_b,
                          ln.data(), s.mean2, s.rstd2, stream);
      // The MLP: its bias and GELU in one pass; the second bias, the residual and the next
      // LayerNorm (the next block's first, or the final one) in one pass.
      // The first product writes fp32: into h itself in fp32, else into scratch that the pass rounds.
      float* y = kCopies ? wide.data() : reinterpret_cast<float*>(s.h);
      products.linear(blas, ln.data(), W(ob.fc_w), y, rows, 4 * d, d, stream);
      bias_gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, P + ob.fc_b, s.h, act.data(), n,
                                                               d);  // 4n values: n quads, d a row
      LAB_CHECK(cudaGetLastError());
      products.linear(blas, act.data(), W(ob.fc2_w), tmp.data(), rows, d, 4 * d, stream);
      if (l + 1 < c.layers) {
        Block& next = saved(l + 1);
        const gpt2::BlockOffsets& on = off.blocks[l + 1];
        residual_layer_norm(s.mid, tmp.data(), P + ob.fc2_b, next.x, P + on.ln1_w, P + on.ln1_b,
                            ln.data(), next.mean1, next.rstd1, stream);
      } else {
        residual_layer_norm(s.mid, tmp.data(), P + ob.fc2_b, head.out, P + off.lnf_w, P + off.lnf_b,
                            ln.data(), head.meanf, head.rstdf, stream);
      }
    }
    // The head, and the loss (with its gradient when there is a backward) in one pass a row.
    const std::size_t head_at = gpt2::stage_begin(c, c.layers);
    round_weights(P, head_at, p.params.size(), head.w, stream);
    head_forward(ln.data(), weight(P, off.head, head.w, head_at), head.logits, stream);
    const float inv_rows = 1.f / float(rows);
    if (phase == gpt2::Phase::forward)
      cross_entropy_kernel<false><<<rows, kThreads, 0, stream>>>(head.logits, p.targets.data(), losses.data(),
                                                                 c.vocab, inv_rows);
    else
      cross_entropy_kernel<true><<<rows, kThreads, 0, stream>>>(head.logits, p.targets.data(), losses.data(),
                                                                c.vocab, inv_rows);
    LAB_CHECK(cudaGetLastError());
    mean_kernel<<<1, kThreads, 0, stream>>>(losses.data(), p.loss.data(), rows);
    LAB_CHECK(cudaGetLastError());
  }

  // done(stage) is called once a stage's gradients are final (stage L: the head and the final
  // LayerNorm; l < L: block l), in the order the backward finishes them.
  template <class Done>
  void backward(Gpt2Step::Problem& p, cudaStream_t stream, Done done) {
    const float* P = p.params.data();
    float* G = p.grads.data();
    const std::size_t n = c.tokens() * d;
    const std::size_t nh = o.size();  // Q, K, V, O by head (padded)
    float* dact = wide.data();        // the MLP's output gradient, then (in place) its pre-activation's
    float *dq = wide.data(), *dk = dq + nh, *dv = dk + nh;  // the attention's, once dact is done with
    float* dqkv = qkv.data();         // the forward's QKV rows, free in the backward
    // The logits hold dloss/dlogits (the cross-entropy kernel wrote it).
    layer_norm_again(head.out, head.meanf, head.rstdf, P + off.lnf_w, P + off.lnf_b, stream);
    head_backward(head.logits, ln.data(), weight(P, off.head, head.w, gpt2::stage_begin(c, c.layers)), dln.data(),
                  G + off.head, stream);
    layer_norm_backward(dln.data(), head.out, P + off.lnf_w, head.meanf, head.rstdf, dx.data(), G + off.lnf_w,
                        G + off.lnf_b, false, stream);
    done(c.layers);
    for (int l = c.layers - 1; l >= 0; --l) {
      const gpt2::BlockOffsets& ob = off.blocks[l];
      const Block& s = saved(l);
      auto W = [&, at = gpt2::stage_begin(c, l)](std::size_t offset) { return weight(P, offset, s.w, at); };
      // The MLP: GELU's output made again from the pre-activation, the second product's backward,
      // GELU's backward in place, the first product's.
      gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s.h, act.data(), n);
      LAB_CHECK(cudaGetLastError());
      products.linear_backward(blas, dx.data(), act.data(), W(ob.fc2_w), dact, G + ob.fc2_w, G + ob.fc2_b, rows, d,
                               4 * d, stream);
      gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(reinterpret_cast<float4*>(dact), s.h, n);
      LAB_CHECK(cudaGetLastError());
      layer_norm_again(s.mid, s.mean2, s.rstd2, P + ob.ln2_w, P + ob.ln2_b, stream);
      products.linear_backward(blas, dact, ln.data(), W(ob.fc_w), dln.data(), G + ob.fc_w, G + ob.fc_b, rows, 4 * d, d,
                               stream);
      layer_norm_backward(dln.data(), s.mid, P + ob.ln2_w, s.mean2, s.rstd2, dx.data(),
                          G + ob.ln2_w, G + ob.ln2_b, true, stream);
      // The attention: dO by head with delta, the flash backward, dQ dK dV back into rows.
      products.linear_backward(blas, dx.data(), s.att, W(ob.proj_w), dln.data(), G + ob.proj_w, G + ob.proj_b,
                               rows, d, d, stream);
      const std::size_t head_rows = c.tokens() * c.heads;
      dout_heads_kernel<<<static_cast<unsigned>(lab::ceil_div(head_rows * 32, kThreads)), kThreads, 0, stream>>>(
          dln.data(), s.att, dout.data(), delta.data(), head_rows, c.context, c.heads, hd, dp);
      LAB_CHECK(cudaGetLastError());
      LAB_CHECK(cudaMemsetAsync(dq, 0, nh * sizeof(float), stream));
      attention.backward(s.q, s.k, s.v, dout.data(), s.lse, delta.data(), dq, dk, dv, c.batch * c.heads, c.context,
                         dp, true, 1.f / std::sqrt(float(hd)), stream);
      qkv_rows_kernel<<<blocks_for(nh), kThreads, 0, stream>>>(dq, dk, dv, dqkv, nh, c.context, c.heads, hd, dp);
      LAB_CHECK(cudaGetLastError());
      layer_norm_again(s.x, s.mean1, s.rstd1, P + ob.ln1_w, P + ob.ln1_b, stream);
      products.linear_backward(blas, dqkv, ln.data(), W(ob.qkv_w), dln.data(), G + ob.qkv_w, G + ob.qkv_b, rows, 3 * d,
                               d, stream);
      layer_norm_backward(dln.data(), s.x, P + ob.ln1_w, s.mean1, s.rstd1, dx.data(),
                          G + ob.ln1_w, G + ob.ln1_b, true, stream);
      done(l);
    }
    ops::embedding_backward(dx.data(), p.tokens.data(), G + off.wte, rows, c.vocab, d, stream);
    ops::positions_backward(dx.data(), G + off.wpe, c.batch, c.context, d, stream);
  }
};

}  // namespace
