// Baseline LayerNorm backward: three kernels, as the formula reads. The two row sums of
// g = dy gamma (a block per row: reads x and dy), then dx element by element (reads x and dy
// again), then dgamma and dbeta with a thread per column walking down every row (reads x and dy a
// third time; only D threads, so a tall matrix leaves most of the GPU idle). Six reads of an
// N x D tensor where two are the minimum.
// Run: make ch03 && ./ch03_kernels/baseline_layernorm_backward
#include "layernorm.cuh"

namespace {
// The variant's scratch: the row sums the dx kernel reads, two a row.
struct Unfused {
  using Topic = LayerNormBackward;
  lab::DeviceBuffer<float> row_sums;
  explicit Unfused(const LayerNormBackward::Problem& p) : row_sums(2 * std::size_t(p.rows)) {}

  void run(LayerNormBackward::Problem& p, cudaStream_t stream) {
    ln::unfused::backward(p.x.data(), p.gamma.data(), p.mean.data(), p.rstd.data(), p.dy.data(), p.dx.data(),
                          p.dgamma.data(), p.dbeta.data(), row_sums.data(), p.rows, p.dim, stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(Unfused, baseline, "three kernels: row sums, dx, column sums");
