// Optimized weighted-sum backward: one pass over x does both gradients. Each thread owns four
// consecutive columns (one float4; a warp covers 512 contiguous bytes of a row) and walks down a
// slice of rows: it reads x's float4, writes dx's float4 = dy[r] * w (w held in registers) and
// adds x * dy[r] into four running dw sums, in registers. No atomics: each slice of rows writes
// one partial dw row, and a second small kernel adds the slices in a fixed order (deterministic).
// Traffic: x read once, dx written once, plus the partials (a few MB at 16384^2, under 1%).
// Rows whose length is not a multiple of 4 take the same path one float at a time.
// Run: make ch03 && ./ch03_kernels/optimized_weighted_sum_backward
#include "weighted_sum.cuh"

namespace {

template <int V>
__global__ void fused_backward(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ dy,
                               float* __restrict__ dx, float* __restrict__ partial, int rows, int dim,
                               int rows_per_part) {
  using Chunk = rows::Chunk<V>;
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (c >= dim) return;
  const int r0 = blockIdx.y * rows_per_part, r1 = min(rows, r0 + rows_per_part);
  const Chunk wv = Chunk::load(w + c);
  float acc[V] = {};
#pragma unroll 4
  for (int r = r0; r < r1; ++r) {
    const float g = dy[r];
    const std::size_t at = std::size_t(r) * dim + c;
    const Chunk xv = Chunk::load(x + at);
    Chunk out;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      out.v[i] = g * wv.v[i];
      acc[i] = fmaf(xv.v[i], g, acc[i]);
    }
    out.store(dx + at);
  }
  Chunk part;
#pragma unroll
  for (int i = 0; i < V; ++i) part.v[i] = acc[i];
  part.store(partial + std::size_t(blockIdx.y) * dim + c);
}

// The variant's state: how it splits the rows (weighted_sum.cuh) and its scratch, the parts'
// partial dw (parts x D).
struct OnePass {
  using Topic = WeightedSumBackward;
  WeightedSumBackwardPlan plan;
  lab::DeviceBuffer<float> partial;
  explicit OnePass(const WeightedSumBackward::Problem& p)
      : plan(p.rows, p.dim, lab::current_device().sms), partial(std::size_t(plan.parts) * p.dim) {}

  void run(WeightedSumBackward::Problem& p, cudaStream_t stream) {
    const dim3 grid(plan.col_blocks, static_cast<unsigned>(plan.parts));
    if (plan.vec == 4)
      fused_backward<4><<<grid, plan.threads, 0, stream>>>(p.x.data(), p.w.data(), p.dy.data(), p.dx.data(),
                                                           partial.data(), p.rows, p.dim, plan.rows_per_part);
    else
      fused_backward<1><<<grid, plan.threads, 0, stream>>>(p.x.data(), p.w.data(), p.dy.data(), p.dx.data(),
                                                           partial.data(), p.rows, p.dim, plan.rows_per_part);
    LAB_CHECK_LAUNCH();
    rows::sum_partials(partial.data(), plan.parts, p.dim, std::size_t(p.dim), p.dw.data(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(OnePass, optimized, "one pass: float4 columns down row slices, dw from per-slice partials");
