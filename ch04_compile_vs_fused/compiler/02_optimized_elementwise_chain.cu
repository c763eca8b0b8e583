// Hand-fused element-wise chain: the whole expression in one kernel written by hand, 16-byte loads
// and stores (four elements a thread, grid-stride) and the bias read as a float4 when the row
// length allows; one read of x, one write of y. No compiler in the loop and no first-call cost;
// the question compare answers is how much the hand gains over lab::jit's generated kernel.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_elementwise_chain
#include "compiler/elementwise_chain.cuh"
#include "lab/launch.hpp"

namespace {
constexpr int kThreads = 256;

__device__ __forceinline__ float chain(float x, float c) {
  const float z = x * ElementwiseChain::kA + ElementwiseChain::kB;
  return 0.5f * z * (1.0f + erff(z * ElementwiseChain::kRsqrt2)) * (1.0f / (1.0f + expf(-x))) + c;
}

__global__ void fused_vec4(const float* __restrict__ x, const float* __restrict__ c, float* __restrict__ y,
                           std::size_t n, int cols) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x, quads = n / 4;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (std::size_t q = first; q < quads; q += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[q];
    const float4 b = *reinterpret_cast<const float4*>(c + (4 * q) % cols);
    reinterpret_cast<float4*>(y)[q] = make_float4(chain(v.x, b.x), chain(v.y, b.y), chain(v.z, b.z), chain(v.w, b.w));
  }
}

__global__ void fused_scalar(const float* __restrict__ x, const float* __restrict__ c, float* __restrict__ y,
                             std::size_t n, int cols) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    y[i] = chain(x[i], c[i % cols]);
}

unsigned blocks_for(std::size_t work) { return lab::grid_for(work, kThreads); }
}  // namespace

LAB_VARIANT(ElementwiseChain, optimized, "hand-fused: one kernel, float4 loads and stores, bias broadcast",
            ElementwiseChain::moves_the_minimum()) {
  if (p.cols % 4 == 0) {  // then n is a multiple of 4 too, and every row starts 16-byte aligned
    fused_vec4<<<blocks_for(p.n / 4), kThreads, 0, stream>>>(p.x.data(), p.c.data(), p.y.data(), p.n, p.cols);
  } else {
    fused_scalar<<<blocks_for(p.n), kThreads, 0, stream>>>(p.x.data(), p.c.data(), p.y.data(), p.n, p.cols);
  }
  LAB_CHECK_LAUNCH();
}
