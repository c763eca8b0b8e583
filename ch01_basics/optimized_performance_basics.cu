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

// The variant's state, all made before timing: the dataset in pinned memory, a cuBLAS handle with
// a fixed workspace, the step's preallocated workspace, two input slots the copies alternate
// between, a copy stream with the events that order it against the compute stream, and the whole
// pass captured once into a CUDA graph.
struct Pipelined {
  using Topic = PerformanceBasics;
  lab::PinnedBuffer<float> data_pinned;
  lab::PinnedBuffer<int> labels_pinned;
  mlp::Blas blas;
  mlp::Workspace ws;
  lab::DeviceBuffer<float> x_slots;
  lab::DeviceBuffer<int> y_slots;
  lab::Stream copy_stream;
  lab::Event slot_ready[2], slot_free[2], fork, join;
  lab::GraphExec graph;

  Pipelined(PerformanceBasics::Problem& p, cudaStream_t stream)
      : data_pinned(p.data.size()), labels_pinned(p.labels.size()), ws(p.batch),
        x_slots(2 * std::size_t(p.batch) * mlp::kIn), y_slots(2 * std::size_t(p.batch)) {
    std::copy(p.data.begin(), p.data.end(), data_pinned.data());
    std::copy(p.labels.begin(), p.labels.end(), labels_pinned.data());
    graph.capture(stream, [&] { capture_pass(p, stream); });  // recorded, not run
  }

  void run(PerformanceBasics::Problem&, cudaStream_t stream) { graph.launch(stream); }

  void capture_pass(PerformanceBasics::Problem& p, cudaStream_t stream) {
    const std::size_t xs = std::size_t(p.batch) * mlp::kIn;
    blas.handle.set_stream(stream);
    fork.record(stream);  // the copy stream joins the capture
    LAB_CHECK(cudaStreamWaitEvent(copy_stream, fork));
    for (int t = 0; t < p.steps; ++t) {
      const int slot = t % 2;
      float* x = x_slots.data() + slot * xs;
      int* y = y_slots.data() + slot * p.batch;
      if (t >= 2) LAB_CHECK(cudaStreamWaitEvent(copy_stream, slot_free[slot]));  // step t-2 is done with it
      LAB_CHECK(cudaMemcpyAsync(x, data_pinned.data() + t * xs, xs * sizeof(float), cudaMemcpyHostToDevice, copy_stream));
      LAB_CHECK(cudaMemcpyAsync(y, labels_pinned.data() + std::size_t(t) * p.batch, p.batch * sizeof(int),
                                cudaMemcpyHostToDevice, copy_stream));
      slot_ready[slot].record(copy_stream);
      LAB_CHECK(cudaStreamWaitEvent(stream, slot_ready[slot]));
      mlp::train_step(blas.handle, p.params.data(), ws, x, y, p.batch, p.losses.data() + t, stream);
      slot_free[slot].record(stream);
    }
    join.record(copy_stream);
    LAB_CHECK(cudaStreamWaitEvent(stream, join));
  }
};

}  // namespace

LAB_VARIANT_CLASS(Pipelined, optimized,
                  "preallocated, pinned async copies overlapping compute, one CUDA graph, no per-step sync");
