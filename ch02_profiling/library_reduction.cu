// Library: CUB's cub::DeviceReduce::Sum, the yardstick. CUB picks its tile sizes and grid per
// architecture and is tuned by NVIDIA to read at the memory's speed; a second, one-thread kernel
// divides by n. Its temporary storage is sized once, before timing, as the library asks.
// Run: make ch02 && ./ch02_profiling/library_reduction
#include <cub/device/device_reduce.cuh>

#include "reduction.cuh"

namespace {
__global__ void divide(float* v, double n) { *v = static_cast<float>(*v / n); }

// CUB's temporary storage, sized by CUB for this n in the prepare step.
struct CubSum {
  using Topic = Reduction;
  std::size_t bytes = 0;
  lab::DeviceBuffer<std::uint8_t> scratch;
  explicit CubSum(const Reduction::Problem& p) : bytes(query(p)), scratch(bytes) {}
  static std::size_t query(const Reduction::Problem& p) {
    std::size_t b = 0;
    LAB_CHECK(cub::DeviceReduce::Sum(nullptr, b, p.x.data(), static_cast<float*>(nullptr),
                                     static_cast<std::int64_t>(p.n)));
    return b;
  }

  void run(Reduction::Problem& p, cudaStream_t stream) {
    LAB_CHECK(cub::DeviceReduce::Sum(scratch.data(), bytes, p.x.data(), p.mean.data(), static_cast<std::int64_t>(p.n),
                                     stream));
    divide<<<1, 1, 0, stream>>>(p.mean.data(), static_cast<double>(p.n));
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(CubSum, library, "cub::DeviceReduce::Sum, then a divide");
