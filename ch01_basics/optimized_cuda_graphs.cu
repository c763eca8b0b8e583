// Optimized: capture the step once into a CUDA graph, then replay the graph with one launch.
// Stream capture records the same launches without running them; instantiation checks and lays
// out the whole graph once; each replay is a single submission, and the GPU walks from one kernel
// to the next itself. The first call pays for capture and instantiation (kept out of the timing
// by the warm-up); a graph is fixed, so this fits steps that repeat with the same shapes and
// pointers, such as a training step.
// Run: make ch01 && ./ch01_basics/optimized_cuda_graphs
#include "cuda_graphs.cuh"

LAB_VARIANT(CudaGraphs, optimized, "the step captured once into a CUDA graph, replayed with one launch") {
  if (!p.graph) p.graph.capture(stream, [&] { cuda_graphs_step(p, stream); });
  p.graph.launch(stream);
}
