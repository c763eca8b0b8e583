// Optimized training loop: the same steps, with the loop's overhead removed.
//   - Preallocated: the workspace and two input slots are made once, before the first step.
//   - Pinned memory, asynchronous copies: the dataset sits in pinned memory (as a prefetching data
//     loader delivers it) and batch t+1 is copied on a second stream while step t computes; two
//     slots and four events keep a copy from overwriting a batch still in use.
//   - One CUDA graph: the whole pass (copies, GEMMs, kernels, for every step) is captured once and
//     replayed with one launch: no per-step launch cost.
//   - No per-step synchronization: losses stay on the device until someone asks for them.
// Run: make ch01 && ./ch01_basics/optimized_performance_basics
#include "performance_basics.cuh"

namespace {

void capture_pass(PerformanceBasics::Problem& p, cudaStream_t stream) {
  const std::size_t xs = std::size_t(p.batch) * mlp::kIn;
  p.handle.set_stream(stream);
  p.fork.record(stream);  // the copy stream joins the capture
  LAB_CHECK(cudaStreamWaitEvent(p.copy_stream, p.fork));
  for (int t = 0; t < p.steps; ++t) {
    const int slot = t % 2;
    float* x = p.x_slots.data() + slot * xs;
    int* y = p.y_slots.data() + slot * p.batch;
    if (t >= 2) LAB_CHECK(cudaStreamWaitEvent(p.copy_stream, p.slot_free[slot]));  // step t-2 is done with it
    LAB_CHECK(cudaMemcpyAsync(x, p.data_pinned.data() + t * xs, xs * sizeof(float), cudaMemcpyHostToDevice, p.copy_stream));
    LAB_CHECK(cudaMemcpyAsync(y, p.labels_pinned.data() + std::size_t(t) * p.batch, p.batch * sizeof(int),
                              cudaMemcpyHostToDevice, p.copy_stream));
    p.slot_ready[slot].record(p.copy_stream);
    LAB_CHECK(cudaStreamWaitEvent(stream, p.slot_ready[slot]));
    mlp::train_step(p.handle, p.params.data(), *p.ws, x, y, p.batch, p.losses.data() + t, stream);
    p.slot_free[slot].record(stream);
  }
  p.join.record(p.copy_stream);
  LAB_CHECK(cudaStreamWaitEvent(stream, p.join));
}

}  // namespace

LAB_VARIANT(PerformanceBasics, optimized, "preallocated, pinned async copies overlapping compute, one CUDA graph, no per-step sync") {
  if (!p.graph) p.graph.capture(stream, [&] { capture_pass(p, stream); });
  p.graph.launch(stream);
}
