// Grid sizing, written once: how many blocks cover a piece of work. Kernels whose reduction or
// tiling is the lesson size their grids themselves, in the open.
#pragma once

#include <algorithm>
#include <cstddef>

namespace lab {

// ceil(n / d), for d > 0.
constexpr std::size_t ceil_div(std::size_t n, std::size_t d) { return (n + d - 1) / d; }

// Blocks of `threads` threads for `work` items, one item a thread, at least one block and at most
// `cap` (a kernel launched with the cap loops over the rest: a grid-stride loop).
constexpr unsigned grid_for(std::size_t work, unsigned threads, std::size_t cap = std::size_t{1} << 20) {
  return static_cast<unsigned>(std::clamp<std::size_t>(ceil_div(work, threads), 1, cap));
}

#ifdef __CUDACC__
// The indices one thread takes in a grid-stride loop over [0, n), in 64 bits:
//   for (std::size_t i : lab::grid_stride(n)) out[i] = f(in[i]);
class GridStride {
 public:
  struct Iterator {
    std::size_t i, stride;
    __device__ std::size_t operator*() const { return i; }
    __device__ Iterator& operator++() {
      i += stride;
      return *this;
    }
    __device__ bool operator!=(const Iterator& end) const { return i < end.i; }  // the loop's only test
  };
  __device__ explicit GridStride(std::size_t n) : n_(n) {}
  __device__ Iterator begin() const {
    return {std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, std::size_t(gridDim.x) * blockDim.x};
  }
  __device__ Iterator end() const { return {n_, 0}; }

 private:
  std::size_t n_;
};
__device__ inline GridStride grid_stride(std::size_t n) { return GridStride(n); }
#endif

}  // namespace lab
