// What the shared main's sources share (common/src only): the Google Benchmark defaults, the
// warm-up count and small helpers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lab/device.hpp"
#include "lab/registry.hpp"

namespace lab::detail {

inline constexpr int kDefaultRepetitions = 5;
inline constexpr double kDefaultMinTimeSeconds = 0.05;  // of GPU time per repetition
inline constexpr int kWarmupRuns = 3;

inline bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

inline std::string shapes_text(const std::vector<Shape>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ' ';
    s += x.str();
  }
  return s;
}

// This process's device, initialised once (init_device).
const DeviceFacts& this_device();

}  // namespace lab::detail
