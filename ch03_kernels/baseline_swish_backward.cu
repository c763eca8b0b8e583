// Baseline Swish backward: dx = dy * s (1 + x (1 - s)), s = sigmoid(x), one thread per element.
// Run: make ch03 && ./ch03_kernels/baseline_swish_backward
#include "activations.cuh"

LAB_VARIANT(SwishBackward, baseline, "scalar: one thread per element, 4-byte loads") {
  ew::map_scalar<<<ew::scalar_blocks(p.n), ew::kThreads, 0, stream>>>(act::SwishOp{}, p.x.data(), p.dy.data(), p.dx.data(), p.n);
  LAB_CHECK_LAUNCH();
}
