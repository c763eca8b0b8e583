// Optimized GELU backward: dx = dy * gelu'(x) with 16-byte loads of x and dy and 16-byte stores,
// four elements a thread: 12 bytes per element at the copy bandwidth.
// Run: make ch03 && ./ch03_kernels/optimized_gelu_backward
#include "activations.cuh"

LAB_VARIANT(GeluBackward, optimized, "vectorized: float4 loads and stores, four elements a thread") {
  ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, p.x.data(), p.dy.data(), p.dx.data(), p.n);
  LAB_CHECK_LAUNCH();
}
