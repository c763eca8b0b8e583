// Baseline: launch the step's kernels one by one from the host onto a stream.
// Every launch goes through the CUDA runtime and the driver (argument packing, checks, pushing a
// command to the GPU): a few microseconds of CPU each. The kernels are tiny, so the GPU finishes
// each before the host has submitted the next, and the step takes kernels x launch cost.
// optimized_cuda_graphs.cu submits the whole step at once.
// Run: make ch01 && ./ch01_basics/baseline_cuda_graphs
#include "cuda_graphs.cuh"

LAB_VARIANT(CudaGraphs, baseline, "one host launch per kernel on a stream") { cuda_graphs_step(p, stream); }
