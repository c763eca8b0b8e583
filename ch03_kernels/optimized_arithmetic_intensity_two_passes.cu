// Step 3, more steps per pass: six steps in each of two kernels. Each element is read once, goes
// through six multiply-adds in registers, and is written once; then again for the other six. The
// traffic falls from 12 passes to 2 (arithmetic intensity 0.25 -> 1.5 FLOP/byte) and the time
// with it: when a kernel is memory-bound, the bytes it moves are its cost.
// Run: make ch03 && ./ch03_kernels/optimized_arithmetic_intensity_two_passes
#include "arithmetic_intensity.cuh"

LAB_VARIANT_STEP(ArithmeticIntensity, 3, "six steps per pass: 2 passes over memory, 1.5 FLOP/byte",
                 ai::passes(2)) {
  ai::steps_vec4<0, 6><<<p.vec4_blocks(), ArithmeticIntensity::kThreads, 0, stream>>>(p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
  ai::steps_vec4<6, 6><<<p.vec4_blocks(), ArithmeticIntensity::kThreads, 0, stream>>>(p.y.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
