// GoogleTest support: GPU tests skip (reported as skipped by CTest, never as passed) on a machine
// without a usable device.
#pragma once

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace lab::testing {

// "" when a usable CUDA device is present; otherwise why not (cached after the first call).
const std::string& gpu_unavailable_reason();

// The seed for this test run: $LAB_SEED if set, else a fresh one (printed once, so a failure can
// be reproduced with LAB_SEED=<seed>).
std::uint64_t run_seed();

}  // namespace lab::testing

#define LAB_REQUIRE_GPU()                                                            \
  do {                                                                               \
    if (const std::string& why = ::lab::testing::gpu_unavailable_reason(); !why.empty()) \
      GTEST_SKIP() << why;                                                           \
  } while (0)
