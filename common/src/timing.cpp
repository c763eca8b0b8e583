#include "lab/timing.hpp"

#include <algorithm>

namespace lab {

const char* cache_mode_name(CacheMode m) { return m == CacheMode::cold ? "cold" : "hot"; }

CacheMode parse_cache_mode(std::string_view s) {
  if (s == "cold") return CacheMode::cold;
  if (s == "hot") return CacheMode::hot;
  throw UsageError("--cache " + std::string(s) + ": expected cold or hot");
}

L2Flusher::L2Flusher(std::size_t l2_bytes)
    : buf_(std::max<std::size_t>(2 * l2_bytes, std::size_t{64} << 20), /*tracked=*/false) {}

void L2Flusher::flush(cudaStream_t s) {
  // A different value each time, so no layer can skip the write as a repeat.
  LAB_CHECK(cudaMemsetAsync(buf_.data(), (round_++ & 0x7F) + 1, buf_.bytes(), s));
}

}  // namespace lab
