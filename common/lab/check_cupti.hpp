// LAB_CHECK support for CUPTI calls: include this where CUPTI is used (link CUDA::cupti).
#pragma once

#include <string>

#include <cupti.h>

#include "lab/check.hpp"

namespace lab::detail {
inline void check(CUptiResult r, const char* expr, const char* file, int line) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " + text,
                  static_cast<int>(r));
}
}  // namespace lab::detail
