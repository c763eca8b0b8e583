// RAII owners for device memory, pinned host memory, streams, events and the cuBLAS handle, and
// the tracker behind every program's "peak device memory" figure. No hand-written cleanup paths:
// an exception anywhere releases everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "lab/check.hpp"

namespace lab {

// Bytes held through DeviceBuffer right now and at most since the last reset_peak().
// Allocations made by libraries (cuBLAS workspaces, the CUDA context) are not counted.
struct MemoryStats {
  std::size_t current = 0;
  std::size_t peak = 0;
};
MemoryStats device_memory_stats();
void reset_device_memory_peak();  // peak := current

// A cap on the tracked allocations (the lab's own buffers; cuBLAS's workspaces and the context are
// not counted), for the process: an allocation that would take the tracked total above it throws
// OutOfMemory, as a smaller device would, before asking the device. So a report meets its OOM rows
// on purpose on any GPU (the demos' --memory-limit). 0: no cap (the default).
void set_device_memory_limit(std::size_t bytes);
std::size_t device_memory_limit();

// Raw allocation used by the owners below: throws OutOfMemory (bytes wanted, free, total) when the
// device cannot satisfy it, CudaError for anything else. Zero bytes gives nullptr.
void* device_alloc(std::size_t bytes, bool tracked = true);
void device_free(void* p, std::size_t bytes, bool tracked = true) noexcept;
void* pinned_alloc(std::size_t bytes);
void pinned_free(void* p) noexcept;

// Device memory for n elements of T. Not initialized: fill it (Rng) or poison it (poison()).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n, bool tracked = true)
      : p_(static_cast<T*>(device_alloc(n * sizeof(T), tracked))), n_(n), tracked_(tracked) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer(std::move(o)).swap(*this);
    return *this;
  }
  ~DeviceBuffer() {
    if (owned_) device_free(p_, n_ * sizeof(T), tracked_);
  }

  // A view of n elements someone else owns (a PyTorch tensor, through the Python bridge): the
  // same interface, nothing freed, nothing counted in device_memory_stats.
  static DeviceBuffer borrow(T* p, std::size_t n) {
    DeviceBuffer b;
    b.p_ = p, b.n_ = n, b.tracked_ = false, b.owned_ = false;
    return b;
  }

  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  std::span<T> span() { return {p_, n_}; }
  std::span<const T> span() const { return {p_, n_}; }

  // Synchronous copies, for setup and verification (never inside a timed region). From pageable
  // memory cudaMemcpy returns once the data is staged, before its DMA has landed, and it runs on the
  // legacy default stream, which the lab's non-blocking streams do not wait for: upload waits for
  // the device, so that the buffer is complete for any stream's next kernel.
  void upload(std::span<const T> host) {
    if (host.size() != n_) throw Error("DeviceBuffer::upload: size mismatch");
    LAB_CHECK(cudaMemcpy(p_, host.data(), bytes(), cudaMemcpyHostToDevice));
    LAB_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) LAB_CHECK(cudaMemcpy(h.data(), p_, bytes(), cudaMemcpyDeviceToHost));
    return h;
  }

  void swap(DeviceBuffer& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(tracked_, o.tracked_);
    std::swap(owned_, o.owned_);
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
  bool tracked_ = true;
  bool owned_ = true;
};

// Page-locked host memory for n elements of T (fast, asynchronous host<->device copies).
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t n) : p_(static_cast<T*>(pinned_alloc(n * sizeof(T)))), n_(n) {}
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    PinnedBuffer(std::move(o)).swap(*this);
    return *this;
  }
  ~PinnedBuffer() { pinned_free(p_); }
  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  std::span<T> span() { return {p_, n_}; }
  T& operator[](std::size_t i) { return p_[i]; }
  void swap(PinnedBuffer& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Fills n bytes at p with 0xFF on the stream: every float, double, half and bf16 becomes NaN, so an
// element the kernel under test never writes cannot pass verification.
void poison_bytes(void* p, std::size_t bytes, cudaStream_t stream = nullptr);
template <class T>
void poison(DeviceBuffer<T>& b, cudaStream_t stream = nullptr) {
  poison_bytes(b.data(), b.bytes(), stream);
}

// A non-blocking stream.
class Stream {
 public:
  Stream() { LAB_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  // A stream of the given priority (lower numbers run first; cudaDeviceGetStreamPriorityRange).
  explicit Stream(int priority) {
    LAB_CHECK(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }
  void sync() const { LAB_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

// A CUDA event with timing enabled.
class Event {
 public:
  Event() { LAB_CHECK(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  cudaEvent_t get() const { return e_; }
  operator cudaEvent_t() const { return e_; }
  void record(cudaStream_t s) { LAB_CHECK(cudaEventRecord(e_, s)); }
  void sync() const { LAB_CHECK(cudaEventSynchronize(e_)); }
  // Milliseconds from start to this event (both recorded and complete).
  float elapsed_ms_since(const Event& start) const {
    float ms = 0;
    LAB_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

// A cuBLAS handle bound to a stream.
class CublasHandle {
 public:
  CublasHandle() { LAB_CHECK(cublasCreate(&h_)); }
  explicit CublasHandle(cudaStream_t s) : CublasHandle() { set_stream(s); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() {
    if (h_) cublasDestroy(h_);
  }
  cublasHandle_t get() const { return h_; }
  operator cublasHandle_t() const { return h_; }
  void set_stream(cudaStream_t s) { LAB_CHECK(cublasSetStream(h_, s)); }

 private:
  cublasHandle_t h_ = nullptr;
};

}  // namespace lab
