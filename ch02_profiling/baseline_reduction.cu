// Baseline mean, the way a first kernel (and the Triton example in our notes) does it: each block
// owns 1024 consecutive elements and ONE thread of it adds them up in a serial loop; the 1024x
// smaller array of block sums is reduced the same way, pass after pass, until one value is left.
// Most threads do nothing, and the one that works issues one 4-byte load at a time and waits for
// each: the memory system sees a trickle of requests. optimized_reduction.cu puts every thread to
// work with wide loads.
// Run: make ch02 && ./ch02_profiling/baseline_reduction
#include "reduction.cuh"

namespace {

constexpr int kChunk = 1024;

__global__ void block_sum_serial(const float* in, float* out, std::size_t n, float scale) {
  if (threadIdx.x != 0) return;
  const std::size_t first = blockIdx.x * std::size_t{kChunk};
  const std::size_t last = first + kChunk < n ? first + kChunk : n;
  float s = 0.f;
  for (std::size_t i = first; i < last; ++i) s += in[i];
  out[blockIdx.x] = s * scale;
}


// The variant's scratch: partial sums alternate between two buffers, each the size of a first pass.
struct SerialPasses {
  using Topic = Reduction;
  lab::DeviceBuffer<float> even, odd;
  explicit SerialPasses(const Reduction::Problem& p)
      : even((p.n + kChunk - 1) / kChunk), odd((p.n + kChunk - 1) / kChunk) {}

  void run(Reduction::Problem& p, cudaStream_t stream) {
    const float* in = p.x.data();
    std::size_t n = p.n;
    float* halves[2] = {even.data(), odd.data()};
    int h = 0;
    while (true) {
      const std::size_t blocks = (n + kChunk - 1) / kChunk;
      const bool last = blocks == 1;
      float* out = last ? p.mean.data() : halves[h];
      block_sum_serial<<<static_cast<unsigned>(blocks), 32, 0, stream>>>(in, out, n, last ? 1.f / float(p.n) : 1.f);
      LAB_CHECK_LAUNCH();
      if (last) break;
      in = out;
      n = blocks;
      h ^= 1;
    }
  }
};
}  // namespace

LAB_VARIANT_CLASS(SerialPasses, baseline, "one thread per block sums 1024 elements serially; pass after pass");
