// The pipelined training pass that the last two steps of the training loop share: step 2
// (optimized_performance_basics_pinned.cu) enqueues it from the host at every run, the final step
// (optimized_performance_basics.cu) captures it once into a CUDA graph and replays that.
//   - Preallocated: the workspace and two input slots are made once, before the first step.
//   - Pinned memory, asynchronous copies: the dataset sits in pinned memory (as a prefetching data
//     loader delivers it) and batch t+1 is copied on a second stream while step t computes; two
//     slots and four events keep a copy from overwriting a batch still in use.
//   - No per-step synchronization: losses stay on the device until someone asks for them.
#pragma once

#include <algorithm>

#include "performance_basics.cuh"

namespace {

// The pass's state, all made before timing: the dataset in pinned memory, a cuBLAS handle with a
// fixed workspace (so that the pass can be captured), the step's workspace, two input slots the
// copies alternate between, and a copy stream with the events that order it against the compute
// stream.
struct PipelinedPass {
  lab::PinnedBuffer<float> data_pinned;
  lab::PinnedBuffer<int> labels_pinned;
  mlp::Blas blas;
  mlp::Workspace ws;
  lab::DeviceBuffer<float> x_slots;
  lab::DeviceBuffer<int> y_slots;
  lab::Stream copy_stream;
  lab::Event slot_ready[2], slot_free[2], fork, join;

  explicit PipelinedPass(const PerformanceBasics::Problem& p)
      : data_pinned(p.data.size()), labels_pinned(p.labels.size()), ws(p.batch),
        x_slots(2 * std::size_t(p.batch) * mlp::kIn), y_slots(2 * std::size_t(p.batch)) {
    std::copy(p.data.begin(), p.data.end(), data_pinned.data());
    std::copy(p.labels.begin(), p.labels.end(), labels_pinned.data());
  }

  // Enqueues one pass over the dataset on `stream` (and the copy stream, which joins it at the
  // start and rejoins it at the end, so that the next pass's copies wait for this one's steps).
  void enqueue(PerformanceBasics::Problem& p, cudaStream_t stream) {
    const std::size_t xs = std::size_t(p.batch) * mlp::kIn;
    blas.handle.set_stream(stream);
    fork.record(stream);
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
