// Baseline square: a general power, powf(x, e), with the exponent e passed at run time (as a
// generic "power" operator would). The compiler cannot assume e == 2, so it emits the full powf:
// a logarithm and an exponential evaluated in software, polynomials in extended precision, plus
// the handling of signs, zeros, infinities and NaN; on sm_90 about a hundred instructions per
// element, with one special-function instruction (MUFU.RCP). See `make square_sass`. The memory
// access is the same in all three variants (lab::map_vec4, 16-byte loads and stores), so what the
// timings compare is the arithmetic alone.
// Run: make ch02 && ./ch02_profiling/baseline_square
#include "lab/elementwise.cuh"
#include "square.cuh"

namespace {
struct PowRuntime {
  float e;  // a kernel argument: its value is unknown when the kernel is compiled
  __device__ float operator()(float v) const { return powf(v, e); }
};
}  // namespace

LAB_VARIANT(Square, baseline, "powf(x, e) with e = 2 known only at run time: the general power") {
  lab::map_vec4<<<lab::vec4_blocks(p.n), lab::kMapThreads, 0, stream>>>(PowRuntime{2.0f}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
