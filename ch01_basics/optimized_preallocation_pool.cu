// Step 1: the stream-ordered allocator. cudaMallocAsync / cudaFreeAsync allocate and free in
// stream order from a memory pool: a free does not synchronize anything, and with the pool's
// release threshold raised, freed memory stays in the pool, so the next step's allocation is a
// quick reuse. Use it when sizes vary from step to step or buffers live briefly (the way
// PyTorch's caching allocator serves eager mode); use preallocation (optimized_preallocation.cu)
// when the step is fixed, which also suits CUDA graphs best.
// Run: make ch01 && ./ch01_basics/optimized_preallocation_pool
#include "preallocation.cuh"

namespace {
// The variant's state: the device's default memory pool, set to keep freed memory instead of
// returning it to the driver at every synchronization (then cudaMallocAsync after the first step
// is a fast reuse); given back when the variant is done.
struct Pool {
  using Topic = Preallocation;
  cudaMemPool_t pool = nullptr;
  Pool() {
    int device = 0;
    LAB_CHECK(cudaGetDevice(&device));
    LAB_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t keep = ~std::uint64_t{0};
    LAB_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() {
    std::uint64_t none = 0;  // give the pool's memory back
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &none);
    cudaDeviceSynchronize();
    cudaMemPoolTrimTo(pool, 0);
  }

  void run(Preallocation::Problem& p, cudaStream_t stream) {
    float *t1 = nullptr, *t2 = nullptr;
    LAB_CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&t1), p.n * sizeof(float), pool, stream));
    LAB_CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&t2), p.n * sizeof(float), pool, stream));
    preallocation_kernels(p.x.data(), t1, t2, p.y.data(), p.n, stream);
    LAB_CHECK(cudaFreeAsync(t2, stream));
    LAB_CHECK(cudaFreeAsync(t1, stream));
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Pool, 1, "cudaMallocAsync/cudaFreeAsync from a pool that keeps its memory");
