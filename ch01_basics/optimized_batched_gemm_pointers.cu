// Step 1: cublasSgemmBatched, with arrays of pointers to each matrix (kept on the device).
// One launch covers the whole batch, so the SMs work on many products at once. Pointer arrays let
// the matrices live anywhere (different allocations, any order), at the cost of one more
// indirection per matrix; optimized_batched_gemm.cu uses a fixed stride instead.
// Run: make ch01 && ./ch01_basics/optimized_batched_gemm_pointers
#include "batched_gemm.cuh"

namespace {
// The variant's state: the three arrays of per-matrix pointers cublasSgemmBatched reads, on the
// device, filled before timing.
struct Pointers {
  using Topic = BatchedGemm;
  Fp32Blas blas;
  lab::DeviceBuffer<const float*> a_ptrs, b_ptrs;
  lab::DeviceBuffer<float*> c_ptrs;
  explicit Pointers(BatchedGemm::Problem& p) : a_ptrs(p.batch), b_ptrs(p.batch), c_ptrs(p.batch) {
    std::vector<const float*> ap(p.batch), bp(p.batch);
    std::vector<float*> cp(p.batch);
    for (int i = 0; i < p.batch; ++i) ap[i] = p.a_ptr(i), bp[i] = p.b_ptr(i), cp[i] = p.c_ptr(i);
    a_ptrs.upload(ap);
    b_ptrs.upload(bp);
    c_ptrs.upload(cp);
  }

  void run(BatchedGemm::Problem& p, cudaStream_t stream) {
    const float one = 1.f, zero = 0.f;
    blas.handle.set_stream(stream);
    LAB_CHECK(cublasSgemmBatched(blas.handle, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &one, b_ptrs.data(), p.n,
                                 a_ptrs.data(), p.k, &zero, c_ptrs.data(), p.n, p.batch));
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Pointers, 1, "cublasSgemmBatched: one launch for the batch, through pointer arrays");
