#include "lab/rng.hpp"

#include <chrono>
#include <random>

namespace lab {

std::uint64_t fresh_seed() {
  std::random_device rd;
  const std::uint64_t hi = rd(), lo = rd();
  const auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  // Keep seeds short enough to type: 48 bits.
  return rng_detail::mix64((hi << 32) ^ lo ^ t) & 0xFFFFFFFFFFFFull;
}

}  // namespace lab
