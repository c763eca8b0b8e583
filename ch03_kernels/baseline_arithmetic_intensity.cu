// Baseline: one kernel per step. Each of the 12 kernels reads the whole array and writes it back,
// doing one fused multiply-add per element in between: 2 FLOPs per 8 bytes, an arithmetic
// intensity of 0.25 FLOP/byte. The GPU spends its time moving the same data twelve times; the
// arithmetic is free. (One thread per element, scalar loads: the way a first kernel is written.)
// Run: make ch03 && ./ch03_kernels/baseline_arithmetic_intensity
#include "arithmetic_intensity.cuh"

namespace {
template <int K>
__global__ void step_scalar(const float* in, float* out, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = ai::steps<K, 1>(in[i]);
}
}  // namespace

LAB_VARIANT(ArithmeticIntensity, baseline, "one kernel per step: 12 passes over memory, 0.25 FLOP/byte",
            ai::passes(ai::kSteps)) {
  const unsigned blocks = static_cast<unsigned>((p.n + ArithmeticIntensity::kThreads - 1) / ArithmeticIntensity::kThreads);
  ai::for_each_step<ai::kSteps>([&]<int K>() {
    step_scalar<K><<<blocks, ArithmeticIntensity::kThreads, 0, stream>>>(K == 0 ? p.x.data() : p.y.data(), p.y.data(), p.n);
    LAB_CHECK_LAUNCH();
  });
}
