// Optimized Swish: 16-byte loads and stores, four elements a thread, grid-stride: fewer memory
// instructions and more independent work per thread, so the kernel runs at the copy bandwidth.
// Run: make ch03 && ./ch03_kernels/optimized_swish
#include "activations.cuh"

LAB_VARIANT(Swish, optimized, "vectorized: float4 loads and stores, four elements a thread") {
  ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(act::SwishOp{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
