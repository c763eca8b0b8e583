// LAB_CHECK for every library the lab calls, on error codes that need no GPU.
#include <string>

#include <gtest/gtest.h>

#include "lab/check.hpp"
#include "lab/memory.hpp"
#include "lab/check_cupti.hpp"
#include "lab/check_nvrtc.hpp"

namespace {

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const lab::CudaError& e) {
    return e.what();
  }
  return "";
}

TEST(Check, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(LAB_CHECK(cudaSuccess));
  EXPECT_NO_THROW(LAB_CHECK(CUBLAS_STATUS_SUCCESS));
  EXPECT_NO_THROW(LAB_CHECK(NVRTC_SUCCESS));
  EXPECT_NO_THROW(LAB_CHECK(CUPTI_SUCCESS));
}

TEST(Check, CublasNamesTheStatusTheCallAndTheLine) {
  const std::string m = message_of([] { LAB_CHECK(CUBLAS_STATUS_INVALID_VALUE); });
  EXPECT_NE(m.find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << m;
  EXPECT_NE(m.find("check_test.cpp:"), std::string::npos) << m;
}

TEST(Check, NvrtcCallFails) {
  // NVRTC runs on the CPU: a program with no source is an invalid input.
  nvrtcProgram prog = nullptr;
  const std::string m = message_of([&] { LAB_CHECK(nvrtcCreateProgram(&prog, nullptr, "x.cu", 0, nullptr, nullptr)); });
  EXPECT_NE(m.find("nvrtcCreateProgram"), std::string::npos) << m;
  EXPECT_NE(m.find("NVRTC_ERROR"), std::string::npos) << m;
}

TEST(Check, CuptiStatusIsNamed) {
  const std::string m = message_of([] { LAB_CHECK(CUPTI_ERROR_INVALID_PARAMETER); });
  EXPECT_NE(m.find("CUPTI_ERROR_INVALID_PARAMETER"), std::string::npos) << m;
}

TEST(Check, ErrorsCarryTheirExitStatus) {
  EXPECT_EQ(lab::UsageError("x").exit_code(), lab::kExitUsage);
  EXPECT_EQ(lab::NoDevice("x").exit_code(), lab::kExitNoDevice);
  EXPECT_EQ(lab::OutOfMemory(10, 5, 20).exit_code(), lab::kExitOutOfMemory);
  EXPECT_NE(std::string(lab::OutOfMemory(10, 5, 20).what()).find("wanted 10 bytes"), std::string::npos);
  EXPECT_EQ(lab::CudaError("x", 1).exit_code(), lab::kExitWrongResult);
}

// The memory cap (--memory-limit) refuses an allocation above it before asking the device (so this
// runs without one), as out of memory, naming the cap; and an untracked allocation is not capped.
TEST(Check, MemoryLimitRefusesWhatWouldGoAboveIt) {
  const std::size_t before = lab::device_memory_stats().current;
  lab::set_device_memory_limit(before + (std::size_t{1} << 20));
  EXPECT_EQ(lab::device_memory_limit(), before + (std::size_t{1} << 20));
  try {
    (void)lab::device_alloc(std::size_t{2} << 20);
    ADD_FAILURE() << "an allocation of 2 MiB under a 1 MiB cap was not refused";
  } catch (const lab::OutOfMemory& e) {
    EXPECT_EQ(e.exit_code(), lab::kExitOutOfMemory);
    EXPECT_EQ(e.wanted(), std::size_t{2} << 20);
    EXPECT_EQ(e.free_bytes(), std::size_t{1} << 20);
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(lab::kOutOfMemoryMarker, 0), 0u) << m;
    EXPECT_NE(m.find("--memory-limit"), std::string::npos) << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "refused with another error: " << e.what();
  }
  EXPECT_EQ(lab::device_memory_stats().current, before);
  lab::set_device_memory_limit(0);
  EXPECT_EQ(lab::device_memory_limit(), 0u);
}

}  // namespace
