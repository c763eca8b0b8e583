// Baseline weighted-sum backward: two separate kernels, written the obvious way. dx: a thread per
// element, dy[r] * w[j]. dw: the buffer cleared, then a thread per element of x adding
// x[r][j] * dy[r] into dw[j] with atomicAdd: B x D atomics onto D addresses, every column's
// B additions serialized in the L2's atomic units, on top of the second pass over memory
// (dx's kernel does not need x, so x is read by the atomic kernel alone, but dy and w are read
// twice and the two kernels cannot overlap).
// Run: make ch03 && ./ch03_kernels/baseline_weighted_sum_backward
#include "weighted_sum.cuh"

namespace {
__global__ void outer_product(const float* __restrict__ w, const float* __restrict__ dy, float* __restrict__ dx,
                              int rows, int dim) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= std::size_t(rows) * dim) return;
  dx[i] = dy[i / dim] * w[i % dim];
}

__global__ void column_sums_atomic(const float* __restrict__ x, const float* __restrict__ dy, float* dw, int rows,
                                   int dim) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= std::size_t(rows) * dim) return;
  atomicAdd(&dw[i % dim], x[i] * dy[i / dim]);
}
}  // namespace

LAB_VARIANT(WeightedSumBackward, baseline, "two kernels: dx a thread per element, dw by atomicAdd") {
  const std::size_t n = std::size_t(p.rows) * p.dim;
  const auto blocks = static_cast<unsigned>((n + 255) / 256);
  outer_product<<<blocks, 256, 0, stream>>>(p.w.data(), p.dy.data(), p.dx.data(), p.rows, p.dim);
  LAB_CHECK_LAUNCH();
  LAB_CHECK(cudaMemsetAsync(p.dw.data(), 0, p.dw.bytes(), stream));
  column_sums_atomic<<<blocks, 256, 0, stream>>>(p.x.data(), p.dy.data(), p.dw.data(), p.rows, p.dim);
  LAB_CHECK_LAUNCH();
}
