// Step 1: cublasSgemmBatched, with arrays of pointers to each matrix (kept on the device).
// One launch covers the whole batch, so the SMs work on many products at once. Pointer arrays let
// the matrices live anywhere (different allocations, any order), at the cost of one more
// indirection per matrix; optimized_batched_gemm.cu uses a fixed stride instead.
// Run: make ch01 && ./ch01_basics/optimized_batched_gemm_pointers
#include "batched_gemm.cuh"

LAB_VARIANT_STEP(BatchedGemm, 1, "cublasSgemmBatched: one launch for the batch, through pointer arrays") {
  const float one = 1.f, zero = 0.f;
  p.handle.set_stream(stream);
  LAB_CHECK(cublasSgemmBatched(p.handle, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &one, p.b_ptrs.data(), p.n, p.a_ptrs.data(), p.k,
                               &zero, p.c_ptrs.data(), p.n, p.batch));
}
