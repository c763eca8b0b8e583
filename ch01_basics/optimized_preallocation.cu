// Optimized: allocate the scratch buffers once, before the first step, and reuse them in every
// step. The step is then only its kernels: no allocator calls, no device-wide synchronization.
// This is what a fixed-shape loop (a training step, a server's inference step) should do, and it
// is what CUDA graphs require, since a graph replays the same pointers.
// Run: make ch01 && ./ch01_basics/optimized_preallocation
#include "preallocation.cuh"

namespace {
// The variant's state: the two scratch buffers, allocated once before timing, reused by every step.
struct Preallocated {
  using Topic = Preallocation;
  lab::DeviceBuffer<float> t1, t2;
  explicit Preallocated(const Preallocation::Problem& p) : t1(p.n), t2(p.n) {}

  void run(Preallocation::Problem& p, cudaStream_t stream) {
    preallocation_kernels(p.x.data(), t1.data(), t2.data(), p.y.data(), p.n, stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(Preallocated, optimized, "scratch buffers allocated once and reused by every step");
