#include "lab/timing.hpp"

#include <algorithm>

namespace lab {

const char* cache_mode_name(CacheMode m) { return m == CacheMode::cold ? "cold" : "hot"; }

CacheMode parse_cache_mode(std::string_view s) {
  if (s == "cold") return CacheMode::cold;
  if (s == "hot") return CacheMode::hot;
  throw UsageError("--cache " + std::string(s) + ": expected cold or hot");
}

L2Flusher::L2Flusher(std::size_t l2_bytes, int sms)
    : buf_(std::max<std::size_t>(2 * l2_bytes, std::size_t{64} << 20) / 16 * 16, /*tracked=*/false),
      sink_(1, /*tracked=*/false),
      sms_(sms) {
  LAB_CHECK(cudaMemset(buf_.data(), 0x5A, buf_.bytes()));
  LAB_CHECK(cudaDeviceSynchronize());  // the buffer's own writes are behind us, not in a timed kernel's L2
}

void L2Flusher::flush(cudaStream_t s) { read_through(buf_.data(), buf_.bytes(), sink_.data(), sms_, s); }

std::vector<double> flushed_samples_ms(const std::function<void()>& fn, cudaStream_t s, L2Flusher* flusher,
                                       int samples, int warmup) {
  for (int i = 0; i < warmup; ++i) fn();
  LAB_CHECK(cudaStreamSynchronize(s));
  Event start, stop;
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(std::max(samples, 0)));
  for (int i = 0; i < samples; ++i) {
    if (flusher) flusher->flush(s);
    ms.push_back(time_once_ms(fn, s, start, stop));
  }
  return ms;
}

}  // namespace lab
