// Optimized square: x * x, one FMUL. Each element costs 8 bytes of memory traffic, so one might
// expect every version to run at the memory's speed; on an H100 the hundred-odd instructions of
// powf do not hide behind the loads, and the multiply is the only one of the three that comes
// near the copy bandwidth. Compare the times, then the SASS (`make square_sass`).
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
