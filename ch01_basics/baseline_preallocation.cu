// Baseline: allocate the step's scratch with cudaMalloc and release it with cudaFree, every step.
// cudaMalloc may have to find and map fresh memory; cudaFree synchronizes the whole device before
// it releases anything, so the host stalls and the GPU drains its queue at the end of every step.
// Both cost far more than the small kernels they serve. optimized_preallocation.cu allocates once.
// Run: make ch01 && ./ch01_basics/baseline_preallocation
#include "preallocation.cuh"

LAB_VARIANT(Preallocation, baseline, "cudaMalloc and cudaFree of the scratch buffers inside every step") {
  float *t1 = nullptr, *t2 = nullptr;
  LAB_CHECK(cudaMalloc(&t1, p.n * sizeof(float)));
  LAB_CHECK(cudaMalloc(&t2, p.n * sizeof(float)));
  preallocation_kernels(p.x.data(), t1, t2, p.y.data(), p.n, stream);
  LAB_CHECK(cudaFree(t2));
  LAB_CHECK(cudaFree(t1));
}
