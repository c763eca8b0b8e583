// Baseline Swish (SiLU, x * sigmoid(x)): one thread per element, 4-byte loads and stores.
// Run: make ch03 && ./ch03_kernels/baseline_swish
#include "activations.cuh"

LAB_VARIANT(Swish, baseline, "scalar: one thread per element, 4-byte loads") {
  ew::map_scalar<<<ew::scalar_blocks(p.n), ew::kThreads, 0, stream>>>(act::SwishOp{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
