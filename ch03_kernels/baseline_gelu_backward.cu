// Baseline GELU backward: dx = dy * gelu'(x), one thread per element, 4-byte loads of x and dy.
// Run: make ch03 && ./ch03_kernels/baseline_gelu_backward
#include "activations.cuh"

LAB_VARIANT(GeluBackward, baseline, "scalar: one thread per element, 4-byte loads") {
  ew::map_scalar<<<ew::scalar_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, p.x.data(), p.dy.data(), p.dx.data(), p.n);
  LAB_CHECK_LAUNCH();
}
