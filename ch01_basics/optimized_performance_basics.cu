// Optimized training loop (the final step): the same steps, with the loop's overhead removed.
//   - Preallocated: the workspace and two input slots are made once, before the first step (step 1,
//     optimized_performance_basics_preallocated.cu).
//   - Pinned memory, asynchronous copies, no per-step synchronization: the dataset sits in pinned
//     memory and batch t+1 is copied on a second stream while step t computes; losses stay on the
//     device (step 2, optimized_performance_basics_pinned.cu; the pass is pipelined_pass.cuh).
//   - One CUDA graph (this step): the whole pass (copies, GEMMs, kernels, for every step) is
//     captured once and replayed with one launch: no per-step launch cost. At small batches a
//     step's kernels take a few microseconds each, as long as the host takes to launch them, so
//     the pass launched from the host leaves the GPU waiting between kernels; replayed, it does not.
// Run: make ch01 && ./ch01_basics/optimized_performance_basics
#include "pipelined_pass.cuh"

namespace {

// The variant's state: the pipelined pass (pipelined_pass.cuh), captured once into a CUDA graph.
struct Pipelined {
  using Topic = PerformanceBasics;
  PipelinedPass pass;
  lab::GraphExec graph;

  Pipelined(PerformanceBasics::Problem& p, cudaStream_t stream) : pass(p) {
    graph.capture(stream, [&] { pass.enqueue(p, stream); });  // recorded, not run
  }

  void run(PerformanceBasics::Problem&, cudaStream_t stream) { graph.launch(stream); }
};

}  // namespace

LAB_VARIANT_CLASS(Pipelined, optimized,
                  "preallocated, pinned async copies overlapping compute, one CUDA graph, no per-step sync");
