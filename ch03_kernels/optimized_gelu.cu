// Optimized GELU (erf form): 16-byte loads and stores, four elements a thread, grid-stride. A
// quarter of the memory instructions for the same bytes, and four independent erfcf evaluations
// per thread to overlap with the loads in flight: the kernel reaches the copy bandwidth.
// Run: make ch03 && ./ch03_kernels/optimized_gelu
#include "activations.cuh"

LAB_VARIANT(Gelu, optimized, "vectorized: float4 loads and stores, four elements a thread") {
  ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluOp{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
