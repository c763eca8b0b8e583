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

// The same sum, divided by the number of flagged values (an integer count: exact in any order).
__global__ void mean_counted_kernel(const float* __restrict__ values, const std::uint8_t* __restrict__ counted,
                                    std::size_t n, float* __restrict__ out, float* __restrict__ count) {
  __shared__ float scratch[32];
  __shared__ unsigned counts[kThreads / 32];
  float s = 0.f;
  unsigned k = 0;
  for (std::size_t i = threadIdx.x; i < n; i += kThreads) {
    s += values[i];
    k += counted[i];
  }
  s = rows::group_sum<kThreads>(s, scratch);
  k = block_count<kThreads>(k, counts);
  if (threadIdx.x == 0) {
    *out = static_cast<float>(double(s) / k);  // 0/0, NaN, when nothing counts
    *count = static_cast<float>(k);
  }
}
}  // namespace

void sum_over(const float* values, std::size_t n, double divisor, float* out, cudaStream_t s) {
  sum_kernel<<<1, kThreads, 0, s>>>(values, n, divisor, out);
  LAB_CHECK_LAUNCH();
}

void mean_over_counted(const float* values, const std::uint8_t* counted, std::size_t n, float* out, float* count,
                       cudaStream_t s) {
  mean_counted_kernel<<<1, kThreads, 0, s>>>(values, counted, n, out, count);
  LAB_CHECK_LAUNCH();
}

}  // namespace loss
