// Optimized GELU on bf16 storage: step 1's kernel (eight bf16 a thread, fp32 in registers, one
// read and one write) with a cheaper erfc. At 4 bytes an element the copy takes less time than
// erfcf's instructions, so the arithmetic is what is left to cut. The output is rounded to bf16,
// 8 significant bits, so erfc needs far fewer than fp32's 24: this one (Numerical Recipes' erfcc,
// a Chebyshev fit in t = 1 / (1 + |z|/2)) is
//   erfc(|z|) = t exp(-z^2 + P(t)),   P a polynomial of degree 9,   relative error < 1.2e-7,
// and erfc(z) = 2 - erfc(|z|) for z < 0: one reciprocal, nine FMAs, one exponential and no branch.
// Emulated in fp32 over every bf16 x in [-12, 12], its GELU is within 2.7e-6 (relative) of the exact
// one for |x| <= 6 and within 9e-6 beyond: hundreds of times inside the rounding to bf16
// (2^-8 = 3.9e-3), which is what the check's bound allows. NaN stays NaN, +inf gives inf and -inf NaN, as
// PyTorch's GELU does. The function is act::erfc_bf16 (activations.cuh), which the backward's final
// variant shares.
// Run: make ch03 && ./ch03_kernels/optimized_gelu_bf16
// The same file on fp16 storage (lab::Stored16) is the program optimized_gelu_fp16: the fit is inside
// fp16's rounding (2^-11 = 4.9e-4) too, by about 180 times.
// lab-storage: fp16
#include "activations.cuh"

LAB_VARIANT(Gelu16, optimized, "step 1 with a cheaper erfc (a degree-9 fit, 1.2e-7 relative: enough for a 16-bit output)") {
  ew::map_packs<<<ew::pack_blocks(p.n), ew::kThreads, 0, stream>>>(act::GeluBf16Op{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
