// Step 1: the stream-ordered allocator. cudaMallocAsync / cudaFreeAsync allocate and free in
// stream order from a memory pool: a free does not synchronize anything, and with the pool's
// release threshold raised, freed memory stays in the pool, so the next step's allocation is a
// quick reuse. Use it when sizes vary from step to step or buffers live briefly (the way
// PyTorch's caching allocator serves eager mode); use preallocation (optimized_preallocation.cu)
// when the step is fixed, which also suits CUDA graphs best.
// Run: make ch01 && ./ch01_basics/optimized_preallocation_pool
#include "preallocation.cuh"

LAB_VARIANT_STEP(Preallocation, 1, "cudaMallocAsync/cudaFreeAsync from a pool that keeps its memory") {
  float *t1 = nullptr, *t2 = nullptr;
  LAB_CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&t1), p.n * sizeof(float), p.pool, stream));
  LAB_CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&t2), p.n * sizeof(float), p.pool, stream));
  preallocation_kernels(p.x.data(), t1, t2, p.y.data(), p.n, stream);
  LAB_CHECK(cudaFreeAsync(t2, stream));
  LAB_CHECK(cudaFreeAsync(t1, stream));
}
