// Optimized mean squared error: a fixed grid (at most Mse::Problem::kMaxBlocks blocks), each
// thread striding through the arrays with 16-byte loads and keeping its own running sum in a
// register; the block adds its threads' sums (shuffles, then shared memory) and writes one
// partial; a one-block kernel adds the partials in a fixed order and divides by n. Thousands of
// values reach the second stage instead of millions of atomics, and the result is the same bits
// every run.
// Run: make ch03 && ./ch03_kernels/optimized_mse
#include "losses.cuh"

namespace {
constexpr int kThreads = 256;

__global__ void squared_error_partials(const float* __restrict__ pred, const float* __restrict__ target,
                                       float* __restrict__ partial, std::size_t n) {
  __shared__ float scratch[32];
  const std::size_t stride = std::size_t{gridDim.x} * kThreads, first = blockIdx.x * std::size_t{kThreads} + threadIdx.x;
  const std::size_t n4 = n / 4;
  float s = 0.f;
#pragma unroll 2
  for (std::size_t i = first; i < n4; i += stride) {
    const float4 a = reinterpret_cast<const float4*>(pred)[i], b = reinterpret_cast<const float4*>(target)[i];
    const float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z, dw = a.w - b.w;
    s += dx * dx + dy * dy + dz * dz + dw * dw;
  }
  for (std::size_t i = 4 * n4 + first; i < n; i += stride) s += (pred[i] - target[i]) * (pred[i] - target[i]);
  s = rows::group_sum<kThreads>(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// The variant's scratch: one partial sum a block, at most kMaxBlocks blocks.
struct TwoStages {
  using Topic = Mse;
  static constexpr std::size_t kMaxBlocks = 4096;
  lab::DeviceBuffer<float> partial{kMaxBlocks};

  void run(Mse::Problem& p, cudaStream_t stream) {
    const std::size_t quads = (p.n + 3) / 4;
    const unsigned blocks = static_cast<unsigned>(std::clamp<std::size_t>(
        (quads + kThreads - 1) / kThreads, 1, std::min<std::size_t>(kMaxBlocks, 8 * lab::current_device().sms)));
    squared_error_partials<<<blocks, kThreads, 0, stream>>>(p.pred.data(), p.target.data(), partial.data(), p.n);
    LAB_CHECK_LAUNCH();
    loss::sum_over(partial.data(), blocks, double(p.n), p.loss.data(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(TwoStages, optimized, "grid-stride float4, a partial per block, a fixed-order second stage");
