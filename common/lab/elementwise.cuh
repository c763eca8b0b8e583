// Element-wise maps over flat fp32 arrays, in the two ways a kernel can read them (the function
// applied is the caller's; the access pattern is what a variant chooses):
//   map_scalar: one thread an element, 4-byte loads: the first kernel everyone writes. With one
//     load in flight a thread, an SM holds 2048 x 4 = 8 KiB of reads in flight, less than the H100
//     needs to cover the memory's latency at full bandwidth (about 3 TB/s x 600 ns / 132 SMs, 14 KB):
//     such kernels stop near 80% of the copy rate on large arrays;
//   map_vec4: 16-byte loads and stores, four elements a thread, grid-stride, the tail one by one:
//     four times the bytes in flight and a quarter of the memory instructions, the copy rate.
//   map_packs: the same for any storage type (fp32, bf16, fp16), input and output types apart: eight
//     elements a thread an iteration (16 bytes of bf16, two float4 of fp32), each converted to
//     fp32 in registers, f applied in fp32, the result rounded to the output's type (nearest).
//     With f the identity it is a cast; with bf16 in and out it is the operation on bf16 storage
//     at the cost of half the bytes, the arithmetic still fp32's.
// Unary: y = f(x). Binary (backward passes): dx = f(x, dy). f is a functor with a __device__
// operator(); x, y (and dy, dx) 16-byte aligned, as lab::DeviceBuffer's allocations are.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace lab {

inline constexpr int kMapThreads = 256;

inline unsigned scalar_blocks(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(1, (n + kMapThreads - 1) / kMapThreads));
}
// Enough blocks for one float4 a thread, at most 2^20 (the loop strides over the rest).
inline unsigned vec4_blocks(std::size_t n) {
  const std::size_t quads = std::max<std::size_t>(1, (n + 3) / 4);
  return static_cast<unsigned>(std::min<std::size_t>((quads + kMapThreads - 1) / kMapThreads, std::size_t{1} << 20));
}

template <class F>
__global__ void map_scalar(F f, const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = f(x[i]);
}

template <class F>
__global__ void map_scalar(F f, const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx,
                           std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) dx[i] = f(x[i], dy[i]);
}

template <class F>
__global__ void map_vec4(F f, const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t n4 = n / 4, stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (std::size_t i = first; i < n4; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<float4*>(y)[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
  }
  for (std::size_t i = 4 * n4 + first; i < n; i += stride) y[i] = f(x[i]);
}

template <class F>
__global__ void map_vec4(F f, const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx,
                         std::size_t n) {
  const std::size_t n4 = n / 4, stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (std::size_t i = first; i < n4; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[i], g = reinterpret_cast<const float4*>(dy)[i];
    reinterpret_cast<float4*>(dx)[i] = make_float4(f(v.x, g.x), f(v.y, g.y), f(v.z, g.z), f(v.w, g.w));
  }
  for (std::size_t i = 4 * n4 + first; i < n; i += stride) dx[i] = f(x[i], dy[i]);
}

// Storage types: a value to fp32 (exact) and an fp32 value back (round to nearest even).
__host__ __device__ inline float to_f32(float v) { return v; }
__host__ __device__ inline float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__host__ __device__ inline float to_f32(__half v) { return __half2float(v); }
template <class T>
__host__ __device__ inline T from_f32(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

// Two 16-bit values (bf16 or fp16) packed in 32 bits, as fp32 (exact); and two fp32 values rounded
// (to nearest, even) into such a pair: the halves of the 8- and 16-byte accesses of 16-bit storage.
template <class T>
__device__ __forceinline__ float2 pair_to_f32(unsigned u) {
  if constexpr (std::is_same_v<T, __half>)
    return __half22float2(*reinterpret_cast<const __half2*>(&u));
  else
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
}
template <class T>
__device__ __forceinline__ unsigned pair_from_f32(float a, float b) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 y = __floats2half2_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&y);
  } else {
    const __nv_bfloat162 y = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&y);
  }
}

// f(x) = x: with map_packs, a cast from one storage type to another.
struct Identity {
  __device__ float operator()(float x) const { return x; }
};

inline constexpr int kPack = 8;  // elements a thread an iteration in map_packs
// Enough blocks for one pack a thread, at most 2^20 (the loop strides over the rest).
inline unsigned pack_blocks(std::size_t n) {
  const std::size_t packs = std::max<std::size_t>(1, (n + kPack - 1) / kPack);
  return static_cast<unsigned>(std::min<std::size_t>((packs + kMapThreads - 1) / kMapThreads, std::size_t{1} << 20));
}

namespace detail {
// kPack elements of T as whole 16-byte words: one or two 128-bit loads and stores.
template <class T>
struct alignas(16) Pack {
  static_assert(kPack * sizeof(T) % 16 == 0);
  T v[kPack];
};
}  // namespace detail

template <class F, class In, class Out>
__global__ void map_packs(F f, const In* __restrict__ x, Out* __restrict__ y, std::size_t n) {
  using PIn = detail::Pack<In>;
  using POut = detail::Pack<Out>;
  const std::size_t np = n / kPack, stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (std::size_t i = first; i < np; i += stride) {
    const PIn a = reinterpret_cast<const PIn*>(x)[i];
    POut b;
#pragma unroll
    for (int k = 0; k < kPack; ++k) b.v[k] = from_f32<Out>(f(to_f32(a.v[k])));
    reinterpret_cast<POut*>(y)[i] = b;
  }
  for (std::size_t i = kPack * np + first; i < n; i += stride) y[i] = from_f32<Out>(f(to_f32(x[i])));
}

template <class F, class In, class Out>
__global__ void map_packs(F f, const In* __restrict__ x, const In* __restrict__ dy, Out* __restrict__ dx,
                          std::size_t n) {
  using PIn = detail::Pack<In>;
  using POut = detail::Pack<Out>;
  const std::size_t np = n / kPack, stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (std::size_t i = first; i < np; i += stride) {
    const PIn a = reinterpret_cast<const PIn*>(x)[i], g = reinterpret_cast<const PIn*>(dy)[i];
    POut b;
#pragma unroll
    for (int k = 0; k < kPack; ++k) b.v[k] = from_f32<Out>(f(to_f32(a.v[k]), to_f32(g.v[k])));
    reinterpret_cast<POut*>(dx)[i] = b;
  }
  for (std::size_t i = kPack * np + first; i < n; i += stride) dx[i] = from_f32<Out>(f(to_f32(x[i]), to_f32(dy[i])));
}

}  // namespace lab
