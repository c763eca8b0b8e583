// Optimized mean: every thread of a grid sized to fill the GPU (8 blocks per SM) walks the array
// with a grid-stride loop, loading 16 bytes (a float4) at a time with four loads in flight, into
// four independent accumulators. A warp then combines its 32 sums with register shuffles
// (__shfl_down_sync, no shared memory), the block's warps combine through shared memory, and the
// block writes one partial; a second, one-block pass adds the partials and divides by n. The
// whole array is read once, by every thread, as fast as the memory delivers it; the result does
// not depend on timing (no atomics), so it is the same on every run.
// Run: make ch02 && ./ch02_profiling/optimized_reduction
#include "lab/device.hpp"
#include "reduction.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;

__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The block's sum, in thread 0.
__device__ float block_sum(float v) {
  __shared__ float warps[kThreads / 32];
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warps[threadIdx.x] : 0.f;
  return threadIdx.x < 32 ? warp_sum(v) : 0.f;
}

__global__ void __launch_bounds__(kThreads) partial_sums(const float* __restrict__ x, std::size_t n, float* partials) {
  const std::size_t tid = blockIdx.x * std::size_t{kThreads} + threadIdx.x;
  const std::size_t stride = std::size_t{gridDim.x} * kThreads;
  const float4* x4 = reinterpret_cast<const float4*>(x);  // cudaMalloc memory is 256-byte aligned
  const std::size_t n4 = n / 4;
  float a = 0.f, b = 0.f, c = 0.f, d = 0.f;
  std::size_t i = tid;
  for (; i + 3 * stride < n4; i += 4 * stride) {  // four 16-byte loads in flight per thread
    const float4 v0 = x4[i], v1 = x4[i + stride], v2 = x4[i + 2 * stride], v3 = x4[i + 3 * stride];
    a += (v0.x + v0.y) + (v0.z + v0.w);
    b += (v1.x + v1.y) + (v1.z + v1.w);
    c += (v2.x + v2.y) + (v2.z + v2.w);
    d += (v3.x + v3.y) + (v3.z + v3.w);
  }
  for (; i < n4; i += stride) {
    const float4 v = x4[i];
    a += (v.x + v.y) + (v.z + v.w);
  }
  for (std::size_t j = 4 * n4 + tid; j < n; j += stride) a += x[j];  // the last n % 4 elements
  const float s = block_sum((a + b) + (c + d));
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kThreads) finish_mean(const float* partials, int count, float* mean, double n) {
  float s = 0.f;
  for (int i = threadIdx.x; i < count; i += kThreads) s += partials[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *mean = static_cast<float>(s / n);
}

int grid_size() { return lab::current_device().sms * kBlocksPerSm; }


// The variant's scratch: one partial sum a block of the grid.
struct TwoPasses {
  using Topic = Reduction;
  lab::DeviceBuffer<float> partials;
  explicit TwoPasses(const Reduction::Problem&) : partials(static_cast<std::size_t>(grid_size())) {}

  void run(Reduction::Problem& p, cudaStream_t stream) {
    const int blocks = static_cast<int>(std::min<std::size_t>(grid_size(), (p.n + kThreads - 1) / kThreads));
    partial_sums<<<blocks, kThreads, 0, stream>>>(p.x.data(), p.n, partials.data());
    LAB_CHECK_LAUNCH();
    finish_mean<<<1, kThreads, 0, stream>>>(partials.data(), blocks, p.mean.data(), static_cast<double>(p.n));
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(TwoPasses, optimized, "grid-stride, 16-byte loads, warp shuffles, two passes: every thread reads");
