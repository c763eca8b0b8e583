// Optimized: allocate the scratch buffers once, before the first step, and reuse them in every
// step. The step is then only its kernels: no allocator calls, no device-wide synchronization.
// This is what a fixed-shape loop (a training step, a server's inference step) should do, and it
// is what CUDA graphs require, since a graph replays the same pointers.
// Run: make ch01 && ./ch01_basics/optimized_preallocation
#include "preallocation.cuh"

LAB_VARIANT(Preallocation, optimized, "scratch buffers allocated once and reused by every step") {
  preallocation_kernels(p.x.data(), p.t1.data(), p.t2.data(), p.y.data(), p.n, stream);
}
