// The two ways this chapter's element-wise kernels read memory, shared by every activation topic
// (the function applied lives with the topic; the access pattern is what a variant chooses):
//   map_scalar: one thread per element, 4-byte loads (the first kernel everyone writes);
//   map_vec4:   16-byte loads and stores, four elements a thread, grid-stride, the tail one by one.
// Unary: y = f(x). Binary (backward passes): dx = f(x, dy).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lab/registry.hpp"

namespace ew {

// The shapes of every topic over one flat array (the activations, the MSE): one dimension, a size
// that fits the L2 and one far beyond it; awkward sizes: one element, fewer than a float4, a
// float4 and one, a large odd count.
struct FlatShapes {
  static constexpr int chapter = 3;
  static std::vector<std::string> dims() { return {"elements"}; }
  static std::vector<lab::Shape> sweep() { return {{16777216}, {268435456}}; }
  static std::vector<lab::Shape> checks() { return {{1}, {3}, {4097}, {1000003}}; }
  static std::string validate(const lab::Shape& s) {
    return s[0] > (std::int64_t{1} << 32) ? "at most 4294967296 elements" : "";
  }
};

constexpr int kThreads = 256;

inline unsigned scalar_blocks(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(1, (n + kThreads - 1) / kThreads));
}
inline unsigned vec4_blocks(std::size_t n) {
  const std::size_t quads = std::max<std::size_t>(1, (n + 3) / 4);
  return static_cast<unsigned>(std::min<std::size_t>((quads + kThreads - 1) / kThreads, std::size_t{1} << 20));
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

}  // namespace ew
