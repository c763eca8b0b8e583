// Baseline LayerNorm: the formula written as three kernels, one statistic each, as a framework
// without fusion runs it: the row means (a block per row), the row variances around them (x read
// again), then y element by element (x read a third time, mean and rstd gathered per element).
// Every kernel is coalesced; the cost is the passes: 3 reads of x and one write of y, where one
// read and one write are the minimum.
// Run: make ch03 && ./ch03_kernels/baseline_layernorm
#include "layernorm.cuh"

LAB_VARIANT(LayerNorm, baseline, "three kernels: row means, row variances, normalize") {
  ln::unfused::forward(p.x.data(), p.gamma.data(), p.beta.data(), p.y.data(), p.mean.data(), p.rstd.data(), p.rows,
                       p.dim, stream);
}
