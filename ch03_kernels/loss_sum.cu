// The last step every loss shares: a sum of per-row (or per-block) values in a fixed order, divided.
#include "losses.cuh"

namespace loss {

namespace {
constexpr int kThreads = 1024;

__global__ void sum_kernel(const float* __restrict__ values, std::size_t n, double divisor, float* __restrict__ out) {
  __shared__ float scratch[32];
  float s = 0.f;
  for (std::size_t i = threadIdx.x; i < n; i += kThreads) s += values[i];
  s = rows::group_sum<kThreads>(s, scratch);
  if (threadIdx.x == 0) *out = static_cast<float>(double(s) / divisor);
}
}  // namespace

void sum_over(const float* values, std::size_t n, double divisor, float* out, cudaStream_t s) {
  sum_kernel<<<1, kThreads, 0, s>>>(values, n, divisor, out);
  LAB_CHECK_LAUNCH();
}

}  // namespace loss
