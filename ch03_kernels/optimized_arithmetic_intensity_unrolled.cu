// Step 1, unrolled: still one kernel per step, but each thread handles four elements (a block
// covers four consecutive tiles of its width, so every load stays coalesced) and issues all four
// loads before it computes. Four independent loads in flight per thread instead of one: more
// bytes requested at once hides more of the memory latency. The traffic is unchanged (12 passes);
// only how well each pass uses the bus improves.
// Run: make ch03 && ./ch03_kernels/optimized_arithmetic_intensity_unrolled
#include "arithmetic_intensity.cuh"

namespace {
constexpr int kPerThread = 4;

template <int K>
__global__ void step_unrolled(const float* in, float* out, std::size_t n) {
  const std::size_t base = blockIdx.x * std::size_t{blockDim.x} * kPerThread + threadIdx.x;
  float v[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const std::size_t i = base + std::size_t(j) * blockDim.x;
    v[j] = i < n ? in[i] : 0.f;
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const std::size_t i = base + std::size_t(j) * blockDim.x;
    if (i < n) out[i] = ai::steps<K, 1>(v[j]);
  }
}
}  // namespace

LAB_VARIANT_STEP(ArithmeticIntensity, 1, "unrolled: four independent elements a thread, still 12 passes",
                 ai::passes(ai::kSteps)) {
  const std::size_t tile = std::size_t{ArithmeticIntensity::kThreads} * kPerThread;
  const unsigned blocks = static_cast<unsigned>((p.n + tile - 1) / tile);
  ai::for_each_step<ai::kSteps>([&]<int K>() {
    step_unrolled<K><<<blocks, ArithmeticIntensity::kThreads, 0, stream>>>(K == 0 ? p.x.data() : p.y.data(), p.y.data(), p.n);
    LAB_CHECK_LAUNCH();
  });
}
