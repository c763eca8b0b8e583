// Optimized: capture the step once into a CUDA graph, then replay the graph with one launch.
// Stream capture records the same launches without running them; instantiation checks and lays
// out the whole graph once; each replay is a single submission, and the GPU walks from one kernel
// to the next itself. The first call pays for capture and instantiation (kept out of the timing
// by the warm-up); a graph is fixed, so this fits steps that repeat with the same shapes and
// pointers, such as a training step.
// Run: make ch01 && ./ch01_basics/optimized_cuda_graphs
#include "cuda_graphs.cuh"

namespace {
// The variant's state: the step captured into a graph before timing (the capture records the
// launches without running them), replayed by each run with one launch.
struct Graph {
  using Topic = CudaGraphs;
  lab::GraphExec graph;
  Graph(CudaGraphs::Problem& p, cudaStream_t stream) {
    graph.capture(stream, [&] { cuda_graphs_step(p, stream); });
  }

  void run(CudaGraphs::Problem&, cudaStream_t stream) { graph.launch(stream); }
};
}  // namespace

LAB_VARIANT_CLASS(Graph, optimized, "the step captured once into a CUDA graph, replayed with one launch");
