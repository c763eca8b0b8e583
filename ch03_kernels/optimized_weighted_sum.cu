// Optimized weighted sum: a warp per row. The 32 lanes read consecutive 16-byte chunks of the row
// (float4: 512 contiguous bytes per warp per load, fully coalesced), four independent loads in
// flight per lane per iteration, each lane keeps a partial sum, and five shuffle steps add the 32
// partial sums in registers: no shared memory, no atomics. Rows whose length is not a multiple of
// 4 (so not 16-byte aligned) take the same path with 4-byte loads.
// Run: make ch03 && ./ch03_kernels/optimized_weighted_sum
#include "weighted_sum.cuh"

namespace {
constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
  return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

__global__ void warp_per_row(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                             int rows, int dim) {
  const int lane = threadIdx.x % 32;
  const std::size_t r = std::size_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r >= std::size_t(rows)) return;
  const float* row = x + r * dim;
  float acc = 0.f;
  if (dim % 4 == 0) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const int n4 = dim / 4;
    int j = lane;
    for (; j + 96 < n4; j += 128) {  // four loads in flight per lane
      const float4 a0 = row4[j], a1 = row4[j + 32], a2 = row4[j + 64], a3 = row4[j + 96];
      acc = dot4(a0, w4[j], acc);
      acc = dot4(a1, w4[j + 32], acc);
      acc = dot4(a2, w4[j + 64], acc);
      acc = dot4(a3, w4[j + 96], acc);
    }
    for (; j < n4; j += 32) acc = dot4(row4[j], w4[j], acc);
  } else {
    for (int j = lane; j < dim; j += 32) acc = fmaf(row[j], w[j], acc);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if (lane == 0) y[r] = acc;
}
}  // namespace

LAB_VARIANT(WeightedSum, optimized, "a warp per row: float4 coalesced loads, shuffle reduction") {
  const unsigned blocks = static_cast<unsigned>((std::size_t(p.rows) + kWarpsPerBlock - 1) / kWarpsPerBlock);
  warp_per_row<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(p.x.data(), p.w.data(), p.y.data(), p.rows, p.dim);
  LAB_CHECK_LAUNCH();
}
