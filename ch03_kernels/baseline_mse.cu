// Baseline mean squared error: a thread per element computes (pred - target)^2, the block adds
// its 256 squares in shared memory, and one thread per block adds the block's sum into the loss
// with atomicAdd; a last kernel divides by n. Per element it is a reasonable first kernel (one
// read of each input), but n / 256 atomics land on a single address, where the L2 serializes
// them, and their order changes from run to run, so the last bits of the loss do too. The total
// is a double: a float total of 2^28 squares would lose several times fp32's 1e-5 to rounding
// (each block's sum rounded to a total a million times larger), which verify would reject.
// Run: make ch03 && ./ch03_kernels/baseline_mse
#include "losses.cuh"

namespace {
constexpr int kThreads = 256;

__global__ void squared_error_atomic(const float* __restrict__ pred, const float* __restrict__ target,
                                     double* total, std::size_t n) {
  __shared__ float scratch[32];
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const float d = i < n ? pred[i] - target[i] : 0.f;
  const float s = rows::group_sum<kThreads>(d * d, scratch);
  if (threadIdx.x == 0) atomicAdd(total, double(s));
}

__global__ void divide(const double* total, std::size_t n, float* loss) { *loss = static_cast<float>(*total / double(n)); }

// The variant's scratch: the double the blocks add into.
struct Atomics {
  using Topic = Mse;
  lab::DeviceBuffer<double> total{1};

  void run(Mse::Problem& p, cudaStream_t stream) {
    LAB_CHECK(cudaMemsetAsync(total.data(), 0, sizeof(double), stream));
    squared_error_atomic<<<static_cast<unsigned>((p.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        p.pred.data(), p.target.data(), total.data(), p.n);
    LAB_CHECK_LAUNCH();
    divide<<<1, 1, 0, stream>>>(total.data(), p.n, p.loss.data());
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(Atomics, baseline, "a thread per element, one atomicAdd per block into the loss");
