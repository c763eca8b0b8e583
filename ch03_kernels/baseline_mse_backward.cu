// Baseline MSE backward: two kernels, as the formula reads: the difference pred - target into
// dpred, then dpred scaled by 2 / n in place. The gradient is written, read back and written
// again: five 4-byte accesses an element where three (two reads, one write) are the minimum.
// Run: make ch03 && ./ch03_kernels/baseline_mse_backward
#include "losses.cuh"

namespace {
constexpr int kThreads = 256;

__global__ void difference(const float* __restrict__ pred, const float* __restrict__ target, float* __restrict__ out,
                           std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = pred[i] - target[i];
}

__global__ void scale(float* __restrict__ grad, std::size_t n, float factor) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) grad[i] *= factor;
}
}  // namespace

LAB_VARIANT(MseBackward, baseline, "two kernels: the difference, then the scale by 2/n") {
  const auto blocks = static_cast<unsigned>((p.n + kThreads - 1) / kThreads);
  difference<<<blocks, kThreads, 0, stream>>>(p.pred.data(), p.target.data(), p.dpred.data(), p.n);
  LAB_CHECK_LAUNCH();
  scale<<<blocks, kThreads, 0, stream>>>(p.dpred.data(), p.n, static_cast<float>(2.0 / double(p.n)));
  LAB_CHECK_LAUNCH();
}
