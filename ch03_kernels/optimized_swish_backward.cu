// Optimized Swish backward: 16-byte loads of x and dy, 16-byte stores of dx, four elements a
// thread: 12 bytes per element at the copy bandwidth.
// Run: make ch03 && ./ch03_kernels/optimized_swish_backward
#include "activations.cuh"

LAB_VARIANT(SwishBackward, optimized, "vectorized: float4 loads and stores, four elements a thread") {
  ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(act::SwishOp{}, p.x.data(), p.dy.data(), p.dx.data(), p.n);
  LAB_CHECK_LAUNCH();
}
