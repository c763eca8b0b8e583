// Baseline GELU (erf form): one thread per element, one 4-byte load and one 4-byte store each.
// The function is a few dozen instructions (erfcf); the kernel is still memory-bound, and how it
// reads memory decides its speed. optimized_gelu.cu reads 16 bytes at a time.
// Run: make ch03 && ./ch03_kernels/baseline_gelu
#include "activations.cuh"

LAB_VARIANT(Gelu, baseline, "scalar: one thread per element, 4-byte loads") {
  ew::map_scalar<<<ew::scalar_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
