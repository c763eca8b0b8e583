// Baseline pipeline: copy the whole buffer in, compute on it, copy it out, one after the other on
// one stream. Correct, simple, and slow: while the copy engine moves data the SMs wait, and while
// the SMs compute the copy engines wait. The time is the sum of the three stages.
// optimized_double_buffering.cu overlaps them.
// Run: make ch01 && ./ch01_basics/baseline_double_buffering
#include "double_buffering.cuh"

LAB_VARIANT(DoubleBuffering, baseline, "one stream, whole buffer: copy in, compute, copy out in sequence") {
  const std::size_t bytes = p.n * sizeof(float);
  LAB_CHECK(cudaMemcpyAsync(p.dev.data(), p.in.data(), bytes, cudaMemcpyHostToDevice, stream));
  double_buffering_launch(p.dev.data(), p.n, p.fmas, stream);
  LAB_CHECK(cudaMemcpyAsync(p.out.data(), p.dev.data(), bytes, cudaMemcpyDeviceToHost, stream));
}
