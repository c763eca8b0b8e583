#include "lab/testing.hpp"

#include <cstdlib>
#include <iostream>

#include "lab/check.hpp"
#include "lab/device.hpp"
#include "lab/rng.hpp"

namespace lab::testing {

const std::string& gpu_unavailable_reason() {
  static const std::string why = [] {
    try {
      init_device();
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }();
  return why;
}

std::uint64_t run_seed() {
  static const std::uint64_t seed = [] {
    if (const char* s = std::getenv("LAB_SEED"); s && *s) return static_cast<std::uint64_t>(std::strtoull(s, nullptr, 0));
    const std::uint64_t f = fresh_seed();
    std::cout << "[ lab      ] inputs from seed " << f << " (reproduce with LAB_SEED=" << f << ")\n";
    return f;
  }();
  return seed;
}

}  // namespace lab::testing
