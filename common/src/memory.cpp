#include "lab/memory.hpp"

#include <algorithm>
#include <atomic>

namespace lab {

namespace {
std::atomic<std::size_t> g_current{0};
std::atomic<std::size_t> g_peak{0};
std::atomic<std::size_t> g_limit{0};

void note_alloc(std::size_t bytes) {
  const std::size_t now = g_current.fetch_add(bytes) + bytes;
  std::size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

MemoryStats device_memory_stats() { return {g_current.load(), g_peak.load()}; }
void reset_device_memory_peak() { g_peak.store(g_current.load()); }
void set_device_memory_limit(std::size_t bytes) { g_limit.store(bytes); }
std::size_t device_memory_limit() { return g_limit.load(); }

void* device_alloc(std::size_t bytes, bool tracked) {
  if (bytes == 0) return nullptr;
  if (const std::size_t limit = g_limit.load(); tracked && limit != 0) {
    const std::size_t used = g_current.load();
    if (used > limit || bytes > limit - used) throw OutOfMemory::over_limit(bytes, used, limit);
  }
  void* p = nullptr;
  const cudaError_t r = cudaMalloc(&p, bytes);
  if (r == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // allocation failures are not sticky; clear it
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(bytes, free_b, total_b);
  }
  LAB_CHECK(r);
  if (tracked) note_alloc(bytes);
  return p;
}

void device_free(void* p, std::size_t bytes, bool tracked) noexcept {
  if (!p) return;
  cudaFree(p);
  if (tracked) g_current.fetch_sub(bytes);
}

void* pinned_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  LAB_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void pinned_free(void* p) noexcept {
  if (p) cudaFreeHost(p);
}

void poison_bytes(void* p, std::size_t bytes, cudaStream_t stream) {
  if (bytes) LAB_CHECK(cudaMemsetAsync(p, 0xFF, bytes, stream));
}

}  // namespace lab
