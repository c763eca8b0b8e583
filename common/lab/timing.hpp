// Timing with CUDA events on the variant's stream. Cold cache (the default) reads a buffer of at
// least twice the L2 before every timed iteration, outside the timed region, so every iteration
// reads its inputs from device memory as a real workload would. A read, not a write: a written
// flush buffer would leave the L2 full of dirty lines whose write-back the next timed kernel
// would pay for (about 4% of a 190 us transpose on an H100, measured against Nsight Compute).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>

#include "lab/memory.hpp"

namespace lab {

enum class CacheMode { cold, hot };
const char* cache_mode_name(CacheMode);
CacheMode parse_cache_mode(std::string_view);  // throws UsageError

class L2Flusher {
 public:
  L2Flusher(std::size_t l2_bytes, int sms);  // the device's (DeviceFacts::l2_bytes, sms)
  void flush(cudaStream_t s);  // asynchronous, on s
  std::size_t bytes() const { return buf_.bytes(); }

 private:
  DeviceBuffer<std::uint8_t> buf_;  // not counted in the peak-memory figure
  DeviceBuffer<int> sink_;
  int sms_;
};

// Reads bytes at p (a multiple of 16) with a grid of sms * 8 blocks; writes nothing.
void read_through(const void* p, std::size_t bytes, int* sink, int sms, cudaStream_t s);
// Copies bytes (a multiple of 16) from src to dst, one 16-byte load and store a thread: a plain
// copy whose speed does not depend on how the size is aligned. cudaMemcpy's does: on an H100,
// cold, 2^23 bytes took 7.9 us and 2^23 + 16 bytes 10.5 us (this kernel: 7.9 and 7.9).
void copy_through(void* dst, const void* src, std::size_t bytes, cudaStream_t s);
// Reads `read` bytes at src and writes `written` bytes at dst (each a multiple of 16), one 16-byte
// load and one 16-byte store a thread, as copy_through (which it is when the two are equal): a
// plain kernel with an operation's access, its reads and writes in the same proportion. What is
// read and not written is folded into a value stored at sink only if it hits an impossible one.
void move_through(void* dst, std::size_t written, const void* src, std::size_t read, int* sink, cudaStream_t s);

// Times one call of fn() on stream s with an event pair; returns milliseconds of GPU time.
template <class F>
float time_once_ms(F&& fn, cudaStream_t s, Event& start, Event& stop) {
  start.record(s);
  fn();
  stop.record(s);
  stop.sync();
  LAB_CHECK_LAUNCH();
  return stop.elapsed_ms_since(start);
}

// The samples every lab tool outside Google Benchmark takes (the demos, the sweep report):
// `warmup` untimed calls, then `samples` calls timed one by one with events on s, each after an
// L2 flush when a flusher is given (cold cache, as in every program). Milliseconds, in order.
std::vector<double> flushed_samples_ms(const std::function<void()>& fn, cudaStream_t s, L2Flusher* flusher,
                                       int samples, int warmup = 3);

}  // namespace lab
