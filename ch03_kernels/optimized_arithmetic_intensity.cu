// Optimized, fused: all 12 steps in one kernel. Each element is read once, updated twelve times in
// a register, and written once: the minimal 8 bytes per element, an arithmetic intensity of
// 3 FLOP/byte. That is still far left of the H100's ridge point (about 20 FLOP/byte, see
// ch02's roofline), so the kernel stays memory-bound and runs at the copy bandwidth; the twelve
// FMAs cost nothing. Fusion is the lesson of the whole ladder: not faster arithmetic, fewer bytes.
// Run: make ch03 && ./ch03_kernels/optimized_arithmetic_intensity
#include "arithmetic_intensity.cuh"

LAB_VARIANT(ArithmeticIntensity, optimized, "fused: all 12 steps in one pass, 3 FLOP/byte",
            ai::passes(1)) {
  ai::steps_vec4<0, ai::kSteps><<<p.vec4_blocks(), ArithmeticIntensity::kThreads, 0, stream>>>(p.x.data(), p.y.data(), p.n);
  LAB_CHECK_LAUNCH();
}
