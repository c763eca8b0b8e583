// Optimized: copy to the device and back from pinned (page-locked) host memory.
// cudaMallocHost memory cannot be paged out, so the copy engine reads and writes it directly by
// DMA: no staging copy by the CPU, and the transfer runs at the bus's bandwidth. The copies are
// also truly asynchronous: the host could queue other work behind them. The price: pinned memory
// is taken away from the operating system, so pin the buffers you transfer, not everything.
// Run: make ch01 && ./ch01_basics/optimized_pinned_memory
#include "pinned_memory.cuh"

LAB_VARIANT(PinnedMemory, optimized, "pinned host memory (cudaMallocHost): direct DMA at bus speed",
            .writes = {"pinned"}) {
  LAB_CHECK(cudaMemcpyAsync(p.dev.data(), p.pinned_in.data(), p.n * sizeof(float), cudaMemcpyHostToDevice, stream));
  LAB_CHECK(cudaMemcpyAsync(p.pinned_out.data(), p.dev.data(), p.n * sizeof(float), cudaMemcpyDeviceToHost, stream));
}
