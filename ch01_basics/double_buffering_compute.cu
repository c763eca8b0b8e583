// The compute stage both double-buffering variants share: the lesson is in how they schedule it.
#include "double_buffering.cuh"

__global__ void double_buffering_compute(float* data, std::size_t n, int fmas) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  float x = data[i];
  for (int k = 0; k < fmas; ++k) x = fmaf(x, DoubleBuffering::kA, DoubleBuffering::kB);
  data[i] = x;
}
