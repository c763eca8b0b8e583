// Library: CUB's cub::DeviceReduce::Sum, the yardstick. CUB picks its tile sizes and grid per
// architecture and is tuned by NVIDIA to read at the memory's speed; a second, one-thread kernel
// divides by n. Its temporary storage is sized once, before timing, as the library asks.
// Run: make ch02 && ./ch02_profiling/library_reduction
#include <cub/device/device_reduce.cuh>

#include "reduction.cuh"

namespace {
__global__ void divide(float* v, double n) { *v = static_cast<float>(*v / n); }
}  // namespace

LAB_VARIANT(Reduction, library, "cub::DeviceReduce::Sum, then a divide") {
  std::size_t bytes = 0;
  LAB_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, p.x.data(), p.mean.data(), static_cast<std::int64_t>(p.n), stream));
  if (p.scratch.bytes() < bytes) p.scratch = lab::DeviceBuffer<std::uint8_t>(bytes);  // first run only
  LAB_CHECK(cub::DeviceReduce::Sum(p.scratch.data(), bytes, p.x.data(), p.mean.data(), static_cast<std::int64_t>(p.n), stream));
  divide<<<1, 1, 0, stream>>>(p.mean.data(), static_cast<double>(p.n));
  LAB_CHECK_LAUNCH();
}
