// Baseline LayerNorm backward: three kernels, as the formula reads. The two row sums of
// g = dy gamma (a block per row: reads x and dy), then dx element by element (reads x and dy
// again), then dgamma and dbeta with a thread per column walking down every row (reads x and dy a
// third time; only D threads, so a tall matrix leaves most of the GPU idle). Six reads of an
// N x D tensor where two are the minimum.
// Run: make ch03 && ./ch03_kernels/baseline_layernorm_backward
#include "layernorm.cuh"

LAB_VARIANT(LayerNormBackward, baseline, "three kernels: row sums, dx, column sums") {
  ln::unfused::backward(p.x.data(), p.gamma.data(), p.mean.data(), p.rstd.data(), p.dy.data(), p.dx.data(),
                        p.dgamma.data(), p.dbeta.data(), p.scratch.data(), p.rows, p.dim, stream);
}
