// The kernels all three preallocation variants run: the lesson is where their scratch comes from.
#include "preallocation.cuh"

namespace {
__global__ void scale(const float* x, float* t1, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) t1[i] = x[i] * Preallocation::kA;
}
__global__ void shift(const float* t1, float* t2, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) t2[i] = t1[i] + Preallocation::kB;
}
__global__ void multiply(const float* t1, const float* t2, float* y, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = t2[i] * t1[i];
}
}  // namespace

void preallocation_kernels(const float* x, float* t1, float* t2, float* y, std::size_t n, cudaStream_t s) {
  const auto blocks = static_cast<unsigned>((n + Preallocation::kThreads - 1) / Preallocation::kThreads);
  scale<<<blocks, Preallocation::kThreads, 0, s>>>(x, t1, n);
  LAB_CHECK_LAUNCH();
  shift<<<blocks, Preallocation::kThreads, 0, s>>>(t1, t2, n);
  LAB_CHECK_LAUNCH();
  multiply<<<blocks, Preallocation::kThreads, 0, s>>>(t1, t2, y, n);
  LAB_CHECK_LAUNCH();
}
