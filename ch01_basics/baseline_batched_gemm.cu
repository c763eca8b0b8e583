// Baseline: a loop of cublasSgemm, one call per matrix of the batch.
// Each call is a separate kernel launch (plus cuBLAS's own heuristics) for a product too small to
// fill more than a few SMs: the GPU runs one tiny GEMM at a time and spends most of the loop
// waiting for the next launch. optimized_batched_gemm.cu issues the batch in one call.
// Run: make ch01 && ./ch01_basics/baseline_batched_gemm
#include "batched_gemm.cuh"

LAB_VARIANT(BatchedGemm, baseline, "a loop of cublasSgemm: one launch per matrix") {
  const float one = 1.f, zero = 0.f;
  p.handle.set_stream(stream);
  for (int i = 0; i < p.batch; ++i)
    LAB_CHECK(cublasSgemm(p.handle, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &one, p.b_ptr(i), p.n, p.a_ptr(i), p.k, &zero, p.c_ptr(i), p.n));
}
