// Baseline training loop, written the way a first version usually is. Every step it:
//   - makes the batch on the host in fresh pageable memory,
//   - allocates its device buffers (cudaMalloc) and frees them at the end (cudaFree syncs),
//   - copies the batch from pageable memory and waits for it (staged by the CPU),
//   - synchronizes and reads the loss back to the host, as printing loss.item() would.
// Each of these makes the host wait for the GPU or the GPU wait for the host; at small batches the
// kernels are a few microseconds and the loop's overhead is most of the step (low goodput).
// optimized_performance_basics.cu removes all four.
// Run: make ch01 && ./ch01_basics/baseline_performance_basics
#include <optional>

#include "performance_basics.cuh"

namespace {
// The variant's state: a cuBLAS handle, and the host-side losses it reads back every step.
struct Naive {
  using Topic = PerformanceBasics;
  mlp::Blas blas;
  std::vector<float> host_losses;

  void run(PerformanceBasics::Problem& p, cudaStream_t stream) {
    blas.handle.set_stream(stream);
    const std::size_t xs = std::size_t(p.batch) * mlp::kIn;
    host_losses.resize(p.steps);
    for (int t = 0; t < p.steps; ++t) {
      // Phases as NVTX ranges: Nsight Systems and `--trace` show where each step's time goes.
      lab::prof::Range step("step");
      std::optional<lab::prof::Range> phase(std::in_place, "host batch");
      std::vector<float> xb(p.data.begin() + t * xs, p.data.begin() + (t + 1) * xs);
      std::vector<int> yb(p.labels.begin() + std::size_t(t) * p.batch, p.labels.begin() + std::size_t(t + 1) * p.batch);
      phase.emplace("allocate");
      mlp::Workspace ws(p.batch);
      lab::DeviceBuffer<float> x(xs);
      lab::DeviceBuffer<int> y(p.batch);
      phase.emplace("copy in");
      // Synchronous copies, on the step's stream. A plain cudaMemcpy would not do: it runs on the
      // legacy default stream, which this non-blocking stream does not wait for, and from pageable
      // memory it returns once the data is staged, before the DMA has landed, so the step's kernels
      // could read the batch before it arrived (this loop's weights were once wrong on an H100).
      LAB_CHECK(cudaMemcpyAsync(x.data(), xb.data(), xs * sizeof(float), cudaMemcpyHostToDevice, stream));
      LAB_CHECK(cudaMemcpyAsync(y.data(), yb.data(), p.batch * sizeof(int), cudaMemcpyHostToDevice, stream));
      LAB_CHECK(cudaStreamSynchronize(stream));
      phase.emplace("train step");
      mlp::train_step(blas.handle, p.params.data(), ws, x.data(), y.data(), p.batch, p.losses.data() + t, stream);
      phase.emplace("sync + loss");
      LAB_CHECK(cudaStreamSynchronize(stream));
      LAB_CHECK(cudaMemcpyAsync(&host_losses[t], p.losses.data() + t, sizeof(float), cudaMemcpyDeviceToHost, stream));
      LAB_CHECK(cudaStreamSynchronize(stream));
      phase.emplace("free");
    }  // ws, x and y are freed here, every step
  }
};
}  // namespace

LAB_VARIANT_CLASS(Naive, baseline,
                  "naive loop: host batch in pageable memory, malloc per step, sync copies, loss read back");
