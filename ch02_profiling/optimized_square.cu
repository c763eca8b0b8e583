// Optimized square: x * x, one FMUL. Whether it is also faster than the general power depends on
// what bounds the kernel: each element costs 8 bytes of memory traffic, and at the H100's
// bandwidth even powf's extra instructions may hide behind the loads. Compare the times, then
// the SASS (`make square_sass`): the same speed does not mean the same code.
// Run: make ch02 && ./ch02_profiling/optimized_square
#include "square.cuh"

namespace {
__global__ void square_mul(const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = v * v;
  }
}
}  // namespace

LAB_VARIANT(Square, optimized, "x * x: one multiply") {
  square_mul<<<p.blocks(), Square::kThreads, 0, stream>>>(p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
