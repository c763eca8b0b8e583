// Optimized MSE backward: one fused kernel, 2 (pred - target) / n, with the chapter's float4
// element-wise map (elementwise.cuh): two reads and one write an element, the minimum.
// Run: make ch03 && ./ch03_kernels/optimized_mse_backward
#include "elementwise.cuh"
#include "losses.cuh"

namespace {
struct ScaledDifference {
  float factor;
  __device__ float operator()(float pred, float target) const { return factor * (pred - target); }
};
}  // namespace

LAB_VARIANT(MseBackward, optimized, "one fused kernel: float4 loads and stores") {
  ew::map_vec4<<<ew::vec4_blocks(p.n), ew::kThreads, 0, stream>>>(
      ScaledDifference{static_cast<float>(2.0 / double(p.n))}, p.pred.data(), p.target.data(), p.dpred.data(), p.n);
  LAB_CHECK_LAUNCH();
}
