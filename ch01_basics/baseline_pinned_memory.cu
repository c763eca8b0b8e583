// Baseline: copy to the device and back from ordinary (pageable) host memory.
// The driver cannot hand pageable memory to the copy engine: the CPU first copies each chunk into
// a pinned staging buffer, then the engine moves it, and the two alternate. The transfer runs at
// the speed of that CPU copy, not of the bus. optimized_pinned_memory.cu uses pinned memory.
// Run: make ch01 && ./ch01_basics/baseline_pinned_memory
#include "pinned_memory.cuh"

LAB_VARIANT(PinnedMemory, baseline, "pageable host memory (std::vector): staged through the driver's pinned buffer",
            .writes = {"pageable"}) {
  LAB_CHECK(cudaMemcpyAsync(p.dev.data(), p.pageable_in.data(), p.n * sizeof(float), cudaMemcpyHostToDevice, stream));
  LAB_CHECK(cudaMemcpyAsync(p.pageable_out.data(), p.dev.data(), p.n * sizeof(float), cudaMemcpyDeviceToHost, stream));
}
