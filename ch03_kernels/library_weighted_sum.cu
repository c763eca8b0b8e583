// Library weighted sum: cuBLAS gemv, the yardstick. x is B x D row-major, which cuBLAS (column-
// major) sees as a D x B matrix with leading dimension D; y = x w is then its transpose times w.
// Run: make ch03 && ./ch03_kernels/library_weighted_sum
#include "weighted_sum.cuh"

namespace {
// The variant's state: its cuBLAS handle.
struct Cublas {
  using Topic = WeightedSum;
  lab::CublasHandle handle;
  explicit Cublas(const WeightedSum::Problem&) {}
  void run(WeightedSum::Problem& p, cudaStream_t stream) {
    handle.set_stream(stream);
    const float one = 1.f, zero = 0.f;
    LAB_CHECK(cublasSgemv(handle, CUBLAS_OP_T, p.dim, p.rows, &one, p.x.data(), p.dim, p.w.data(), 1, &zero,
                          p.y.data(), 1));
  }
};
}  // namespace

LAB_VARIANT_CLASS(Cublas, library, "cuBLAS Sgemv (the transpose of the column-major view)");
