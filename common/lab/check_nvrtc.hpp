// LAB_CHECK support for NVRTC calls: include this where NVRTC is used (link CUDA::nvrtc).
#pragma once

#include <string>

#include <nvrtc.h>

#include "lab/check.hpp"

namespace lab::detail {
inline void check(nvrtcResult r, const char* expr, const char* file, int line) {
  if (r == NVRTC_SUCCESS) return;
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                      nvrtcGetErrorString(r),
                  static_cast<int>(r));
}
}  // namespace lab::detail
