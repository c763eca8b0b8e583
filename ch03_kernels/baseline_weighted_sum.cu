// Baseline weighted sum: one thread per row, each summing its row in a loop. At every step the 32
// threads of a warp read 32 elements D floats apart: 32 separate memory transactions for 128
// useful bytes, where a coalesced read would take one or four. The loop over a row is also
// serial, so few loads are in flight. Small B leaves most of the GPU idle on top of that.
// Run: make ch03 && ./ch03_kernels/baseline_weighted_sum
#include "weighted_sum.cuh"

namespace {
__global__ void row_per_thread(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                               int rows, int dim) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* row = x + std::size_t(r) * dim;
  float acc = 0.f;
  for (int j = 0; j < dim; ++j) acc = fmaf(row[j], w[j], acc);
  y[r] = acc;
}
}  // namespace

LAB_VARIANT(WeightedSum, baseline, "one thread per row: uncoalesced, serial") {
  row_per_thread<<<(p.rows + 127) / 128, 128, 0, stream>>>(p.x.data(), p.w.data(), p.y.data(), p.rows, p.dim);
  LAB_CHECK_LAUNCH();
}
