// Baseline training loop, written the way a first version usually is. Every step it:
//   - makes the batch on the host in fresh pageable memory,
//   - allocates its device buffers (cudaMalloc) and frees them at the end (cudaFree syncs),
//   - copies the batch with synchronous cudaMemcpy (pageable: staged by the CPU),
//   - synchronizes and reads the loss back to the host, as printing loss.item() would.
// Each of these makes the host wait for the GPU or the GPU wait for the host; at small batches the
// kernels are a few microseconds and the loop's overhead is most of the step (low goodput).
// optimized_performance_basics.cu removes all four.
// Run: make ch01 && ./ch01_basics/baseline_performance_basics
#include "performance_basics.cuh"

LAB_VARIANT(PerformanceBasics, baseline, "naive loop: host batch in pageable memory, malloc per step, sync copies, loss read back") {
  p.handle.set_stream(stream);
  const std::size_t xs = std::size_t(p.batch) * mlp::kIn;
  p.host_losses.resize(p.steps);
  for (int t = 0; t < p.steps; ++t) {
    std::vector<float> xb(p.data.begin() + t * xs, p.data.begin() + (t + 1) * xs);
    std::vector<int> yb(p.labels.begin() + std::size_t(t) * p.batch, p.labels.begin() + std::size_t(t + 1) * p.batch);
    mlp::Workspace ws(p.batch);
    lab::DeviceBuffer<float> x(xs);
    lab::DeviceBuffer<int> y(p.batch);
    LAB_CHECK(cudaMemcpy(x.data(), xb.data(), xs * sizeof(float), cudaMemcpyHostToDevice));
    LAB_CHECK(cudaMemcpy(y.data(), yb.data(), p.batch * sizeof(int), cudaMemcpyHostToDevice));
    mlp::train_step(p.handle, p.params.data(), ws, x.data(), y.data(), p.batch, p.losses.data() + t, stream);
    LAB_CHECK(cudaStreamSynchronize(stream));
    LAB_CHECK(cudaMemcpy(&p.host_losses[t], p.losses.data() + t, sizeof(float), cudaMemcpyDeviceToHost));
  }  // ws, x and y are freed here, every step
}
