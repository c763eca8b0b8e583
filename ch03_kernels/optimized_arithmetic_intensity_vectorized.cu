// Step 2, vectorized: one kernel per step still, now with 16-byte loads and stores (float4: four
// elements in one instruction, ai::steps_vec4 in the header). Fewer, wider memory instructions
// per byte keep more of the memory system busy. Still 12 passes and 0.25 FLOP/byte. On an H100 the
// unrolled step already keeps each pass at the copy bandwidth and this one adds nothing measurable;
// on older GPUs it was the largest step. What is left is the twelve passes themselves.
// Run: make ch03 && ./ch03_kernels/optimized_arithmetic_intensity_vectorized
#include "arithmetic_intensity.cuh"

LAB_VARIANT_STEP(ArithmeticIntensity, 2, "vectorized: float4 loads and stores, still 12 passes",
                 ai::passes(ai::kSteps)) {
  ai::for_each_step<ai::kSteps>([&]<int K>() {
    ai::steps_vec4<K, 1><<<p.vec4_blocks(), ArithmeticIntensity::kThreads, 0, stream>>>(
        K == 0 ? p.x.data() : p.y.data(), p.y.data(), p.n);
    LAB_CHECK_LAUNCH();
  });
}
