// Baseline square: a general power, powf(x, e), with the exponent e passed at run time (as a
// generic "power" operator would). The compiler cannot assume e == 2, so it emits the full powf:
// a logarithm and an exponential evaluated in software, polynomials in extended precision, plus
// the handling of signs, zeros, infinities and NaN; on sm_90 about a hundred instructions per
// element, with one special-function instruction (MUFU.RCP). See `make square_sass`.
// Run: make ch02 && ./ch02_profiling/baseline_square
#include "square.cuh"

namespace {
__global__ void square_pow_runtime(const float* __restrict__ x, float* __restrict__ y, std::size_t n, float e) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = powf(x[i], e);
}
}  // namespace

LAB_VARIANT(Square, baseline, "powf(x, e) with e = 2 known only at run time: the general power") {
  square_pow_runtime<<<p.blocks(), Square::kThreads, 0, stream>>>(p.x.data(), p.y.data(), p.n, 2.0f);
  LAB_CHECK_LAUNCH();
}
