// Step 1: powf(x, 2.0f), the exponent a compile-time constant. One might expect the compiler to
// turn it into x * x; nvcc 13 does not: `make square_sass` shows nearly the whole general powf
// still there. Knowing the exponent saves a little; writing the multiply saves the rest.
// Run: make ch02 && ./ch02_profiling/optimized_square_powf
#include "square.cuh"

namespace {
__global__ void square_powf_const(const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = powf(x[i], 2.0f);
}
}  // namespace

LAB_VARIANT_STEP(Square, 1, "powf(x, 2.0f): the exponent known at compile time") {
  square_powf_const<<<p.blocks(), Square::kThreads, 0, stream>>>(p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
