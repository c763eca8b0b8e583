// Optimized GELU backward on bf16 storage: step 1's kernel with the forward's cheaper erfc
// (act::erfc_bf16, activations.cuh: a degree-9 fit of 1.2e-7 relative error, one exponential, no
// branch) for gelu'(x) = 0.5 erfc(-x / sqrt 2) + x phi(x), and __expf for phi. The result keeps
// bf16's 8 significant bits, and the check's bound is that rounding's (2^-8) on top of fp32's:
// over every bf16 x in [-12, 12] the function stays inside it (the CPU test,
// tests/cpu/activations_16bit_check_test.cu). Near gelu's root (x = -0.7518) dx passes through 0,
// where the bound's absolute term (1e-5) holds what is left of the two terms' rounding.
// Run: make ch03 && ./ch03_kernels/optimized_gelu_backward_bf16
// The same file on fp16 storage (lab::Stored16) is the program optimized_gelu_backward_fp16.
// lab-storage: fp16
#include "activations.cuh"

LAB_VARIANT(GeluBackward16, optimized, "step 1 with the forward's cheaper erfc (act::erfc_bf16) and __expf") {
  ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluBf16Op{}, p.x.data(), p.dy.data(),
                                                                    p.dx.data(), p.n);
  LAB_CHECK_LAUNCH();
}
