// Element-wise maps over flat fp32 arrays, in the two ways a kernel can read them (the function
// applied is the caller's; the access pattern is what a variant chooses):
//   map_scalar: one thread an element, 4-byte loads: the first kernel everyone writes. With one
//     load in flight a thread, an SM holds 2048 x 4 = 8 KiB of reads in flight, less than the H100
//     needs to cover the memory's latency at full bandwidth (about 3 TB/s x 600 ns / 132 SMs, 14 KB):
//     such kernels stop near 80% of the copy rate on large arrays;
//   map_vec4: 16-byte loads and stores, four elements a thread, grid-stride, the tail one by one:
//     four times the bytes in flight and a quarter of the memory instructions, the copy rate.
// Unary: y = f(x). Binary (backward passes): dx = f(x, dy). f is a functor with a __device__
// operator(); x, y (and dy, dx) 16-byte aligned, as lab::DeviceBuffer's allocations are.
#pragma once

#include <algorithm>
#include <cstddef>

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

}  // namespace lab
