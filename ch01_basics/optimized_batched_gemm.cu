// Optimized: cublasSgemmStridedBatched: the whole batch in one call, matrix i found at a fixed
// stride from matrix 0. One launch spreads every product of the batch over the GPU, and the
// stride replaces the pointer arrays (nothing to build or read per matrix). It fits whenever the
// batch is one contiguous tensor, the usual case (attention heads, grouped convolutions).
// Run: make ch01 && ./ch01_basics/optimized_batched_gemm
#include "batched_gemm.cuh"

namespace {
struct Strided {
  using Topic = BatchedGemm;
  Fp32Blas blas;

  void run(BatchedGemm::Problem& p, cudaStream_t stream) {
    const float one = 1.f, zero = 0.f;
    blas.handle.set_stream(stream);
    LAB_CHECK(cublasSgemmStridedBatched(blas.handle, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &one, p.b.data(), p.n,
                                        std::int64_t(p.k) * p.n, p.a.data(), p.k, std::int64_t(p.m) * p.k, &zero,
                                        p.c.data(), p.n, std::int64_t(p.m) * p.n, p.batch));
  }
};
}  // namespace

LAB_VARIANT_CLASS(Strided, optimized, "cublasSgemmStridedBatched: one launch for the batch, fixed strides");
