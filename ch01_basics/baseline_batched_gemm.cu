// Baseline: a loop of cublasSgemm, one call per matrix of the batch.
// Each call is a separate kernel launch (plus cuBLAS's own heuristics) for a product too small to
// fill more than a few SMs: the GPU runs one tiny GEMM at a time and spends most of the loop
// waiting for the next launch. optimized_batched_gemm.cu issues the batch in one call.
// Run: make ch01 && ./ch01_basics/baseline_batched_gemm
#include "batched_gemm.cuh"

namespace {
struct Loop {
  using Topic = BatchedGemm;
  Fp32Blas blas;

  void run(BatchedGemm::Problem& p, cudaStream_t stream) {
    const float one = 1.f, zero = 0.f;
    blas.handle.set_stream(stream);
    for (int i = 0; i < p.batch; ++i)
      LAB_CHECK(cublasSgemm(blas.handle, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &one, p.b_ptr(i), p.n, p.a_ptr(i), p.k,
                            &zero, p.c_ptr(i), p.n));
  }
};
}  // namespace

LAB_VARIANT_CLASS(Loop, baseline, "a loop of cublasSgemm: one launch per matrix");
