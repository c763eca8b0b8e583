// Step 1: preallocated. The baseline (baseline_performance_basics.cu) made the batch in fresh host
// vectors and allocated the step's device buffers (cudaMalloc) every step, freeing them at its end
// (cudaFree synchronizes the device). Here the workspace and the batch's device buffers are made
// once, before the first step, and the batch is copied straight from the dataset: the seed's first
// optimization (preallocated tensors instead of new ones every iteration). Everything else is the
// baseline's: each step still copies its batch from pageable memory and waits for it, and waits
// again to read its loss back, so the host and the GPU still take turns.
// Why it is faster: an allocation and a free cost tens of microseconds of host time each, and the
// free waits for the device; at small batches that is more than the step's kernels take.
// Run: make ch01 && ./ch01_basics/optimized_performance_basics_preallocated
#include <optional>

#include "performance_basics.cuh"

namespace {
// The variant's state: a cuBLAS handle, the step's workspace and the batch's device buffers, made
// once, and the host-side losses it reads back every step.
struct Preallocated {
  using Topic = PerformanceBasics;
  mlp::Blas blas;
  mlp::Workspace ws;
  lab::DeviceBuffer<float> x;
  lab::DeviceBuffer<int> y;
  std::vector<float> host_losses;

  Preallocated(PerformanceBasics::Problem& p, cudaStream_t)
      : ws(p.batch), x(std::size_t(p.batch) * mlp::kIn), y(std::size_t(p.batch)), host_losses(std::size_t(p.steps)) {}

  void run(PerformanceBasics::Problem& p, cudaStream_t stream) {
    blas.handle.set_stream(stream);
    const std::size_t xs = std::size_t(p.batch) * mlp::kIn;
    for (int t = 0; t < p.steps; ++t) {
      // Phases as NVTX ranges, as the baseline's: "host batch", "allocate" and "free" are gone.
      lab::prof::Range step("step");
      std::optional<lab::prof::Range> phase(std::in_place, "copy in");
      // On the step's stream and waited for: see the baseline for why not a plain cudaMemcpy.
      LAB_CHECK(cudaMemcpyAsync(x.data(), p.data.data() + t * xs, xs * sizeof(float), cudaMemcpyHostToDevice, stream));
      LAB_CHECK(cudaMemcpyAsync(y.data(), p.labels.data() + std::size_t(t) * p.batch, p.batch * sizeof(int),
                                cudaMemcpyHostToDevice, stream));
      LAB_CHECK(cudaStreamSynchronize(stream));
      phase.emplace("train step");
      mlp::train_step(blas.handle, p.params.data(), ws, x.data(), y.data(), p.batch, p.losses.data() + t, stream);
      phase.emplace("sync + loss");
      LAB_CHECK(cudaStreamSynchronize(stream));
      LAB_CHECK(cudaMemcpyAsync(&host_losses[t], p.losses.data() + t, sizeof(float), cudaMemcpyDeviceToHost, stream));
      LAB_CHECK(cudaStreamSynchronize(stream));
    }
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Preallocated, 1,
                       "workspace and batch buffers made once; still pageable copies waited for and the loss "
                       "read back every step");
