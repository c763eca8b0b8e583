// Step 2: pinned memory and asynchronous copies, no per-step synchronization. Step 1
// (optimized_performance_basics_preallocated.cu) made the buffers once but still copied every
// batch from pageable memory and waited for it, then waited again to read the step's loss. Here
// the dataset sits in pinned memory (as a DataLoader with pin_memory=True delivers it: the
// seed's second optimization), so a copy is one DMA at the bus's rate with no staging by the CPU,
// and it runs on a second stream into one of two slots while the previous step computes; the
// losses stay on the device. Nothing waits any more: the host enqueues the whole pass
// (pipelined_pass.cuh) and the GPU runs it, copies overlapping compute.
// What is left: the host still launches every kernel and copy of every step. At small batches a
// step's kernels take a few microseconds each, about what a launch costs the host, so the GPU
// waits between them; the final step (optimized_performance_basics.cu) captures this same pass
// into a CUDA graph.
// Run: make ch01 && ./ch01_basics/optimized_performance_basics_pinned
#include "pipelined_pass.cuh"

namespace {

// The variant's state: the pipelined pass (pipelined_pass.cuh), enqueued from the host at each run.
struct Pinned {
  using Topic = PerformanceBasics;
  PipelinedPass pass;

  Pinned(PerformanceBasics::Problem& p, cudaStream_t) : pass(p) {}

  void run(PerformanceBasics::Problem& p, cudaStream_t stream) { pass.enqueue(p, stream); }
};

}  // namespace

LAB_VARIANT_CLASS_STEP(Pinned, 2,
                       "preallocated, pinned async copies overlapping compute, no per-step sync; every "
                       "kernel launched from the host");
