// Step 1, the tanh approximation: gelu(x) ~ 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the
// form GPT-2 used because tanh was cheaper than erf on the hardware of its day; with float4 loads
// like the final variant. It is an approximation on purpose, so it is judged by its own tolerance:
// the formula's largest deviation from the exact GELU is 4.73e-4 (at |x| near 2.3), so every
// element must lie within 5e-4 (plus fp32's 1e-5 relative). That bound is the whole guarantee: a
// relative-L2 bound would depend on how many inputs fall where GELU is near zero (one element at
// x = -3 is 17% off in relative terms, and correct). The exact erf form follows
// it as the final variant: compare shows whether the cheaper function buys any time in a kernel
// whose cost is its bytes (on an H100 it does not).
// Run: make ch03 && ./ch03_kernels/optimized_gelu_tanh
#include "activations.cuh"

namespace {
struct GeluTanhFn {
  __device__ float operator()(float x) const {
    const float inner = 0.79788456080286536f * fmaf(0.044715f * x, x * x, x);
    return 0.5f * x * (1.f + tanhf(inner));
  }
};
}  // namespace

LAB_VARIANT_STEP(Gelu, 1, "tanh approximation, float4 (judged by its own bound: every element within 5e-4)",
                 .tolerance = lab::Tolerance::per_element(5e-4, 1e-5, "gelu tanh approximation")) {
  ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(GeluTanhFn{}, p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
