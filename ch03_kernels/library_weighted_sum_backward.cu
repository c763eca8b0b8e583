// Library weighted-sum backward: cuBLAS, the yardstick. In cuBLAS's column-major view x is a
// D x B matrix with leading dimension D, and so is dx: dx = w dy^T is a gemm with k = 1 (an outer
// product), and dw = x dy is a gemv without transpose. Two calls, two passes.
// Run: make ch03 && ./ch03_kernels/library_weighted_sum_backward
#include "weighted_sum.cuh"

namespace {
// The variant's state: its cuBLAS handle.
struct Cublas {
  using Topic = WeightedSumBackward;
  lab::CublasHandle handle;
  explicit Cublas(const WeightedSumBackward::Problem&) {}
  void run(WeightedSumBackward::Problem& p, cudaStream_t stream) {
    handle.set_stream(stream);
    const float one = 1.f, zero = 0.f;
    LAB_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, p.dim, p.rows, 1, &one, p.w.data(), p.dim,
                          p.dy.data(), 1, &zero, p.dx.data(), p.dim));
    LAB_CHECK(cublasSgemv(handle, CUBLAS_OP_N, p.dim, p.rows, &one, p.x.data(), p.dim, p.dy.data(), 1, &zero,
                          p.dw.data(), 1));
  }
};
}  // namespace

LAB_VARIANT_CLASS(Cublas, library, "cuBLAS: Sgemm with k = 1 for dx, Sgemv for dw");
