// Sums and maxima over a whole thread block, for the row kernels that give a block one row (the
// GPT-2 step's LayerNorm, log-softmax and cross-entropy): a warp's shuffles, then the warps'
// results through shared memory, added in the same order by every thread, which all get the result.
#pragma once

#include <cmath>

#include <cuda_runtime.h>

namespace blockwide {

// Threads is the block's size, a multiple of 32. The first barrier lets a previous call's readers
// finish with the scratch; every thread of the block must call.
template <int Threads, class Op>
__device__ __forceinline__ float reduce(float v, Op op) {
  static_assert(Threads % 32 == 0 && Threads <= 1024);
  __shared__ float warps[Threads / 32];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(~0u, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  float t = warps[0];
  for (int w = 1; w < Threads / 32; ++w) t = op(t, warps[w]);
  return t;
}

struct Plus {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Greater {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <int Threads>
__device__ __forceinline__ float sum(float v) { return reduce<Threads>(v, Plus{}); }

// Two sums at once: one pass through shared memory, two barriers where two sum() calls take four.
template <int Threads>
__device__ __forceinline__ float2 sum2(float2 v) {
  static_assert(Threads % 32 == 0 && Threads <= 1024);
  __shared__ float2 warps[Threads / 32];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v.x += __shfl_xor_sync(~0u, v.x, o), v.y += __shfl_xor_sync(~0u, v.y, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  float2 t = warps[0];
  for (int w = 1; w < Threads / 32; ++w) t.x += warps[w].x, t.y += warps[w].y;
  return t;
}
template <int Threads>
__device__ __forceinline__ float max(float v) { return reduce<Threads>(v, Greater{}); }

}  // namespace blockwide
