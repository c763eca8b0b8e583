// Error handling for the lab: one macro, LAB_CHECK(call), for CUDA runtime and cuBLAS calls (and
// NVRTC / CUPTI calls once check_nvrtc.hpp / check_cupti.hpp are included). A failing call throws
// with the call's text, file and line; the shared main turns the exception into an exit status.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <functional>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "lab/contract.hpp"

namespace lab {

// Base of every error the lab throws on purpose.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitWrongResult)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A failing CUDA / cuBLAS / NVRTC / CUPTI call.
class CudaError : public Error {
 public:
  CudaError(const std::string& what, int code) : Error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// An allocation the device could not satisfy.
class OutOfMemory : public Error {
 public:
  OutOfMemory(std::size_t wanted, std::size_t free_bytes, std::size_t total_bytes);
  // An allocation above the process's cap (set_device_memory_limit, --memory-limit): the same
  // error and exit status, its message naming the cap.
  static OutOfMemory over_limit(std::size_t wanted, std::size_t used, std::size_t limit);
  std::size_t wanted() const { return wanted_; }
  std::size_t free_bytes() const { return free_; }

 private:
  OutOfMemory(const std::string& message, std::size_t wanted, std::size_t free_bytes);
  std::size_t wanted_, free_;
};

// No device, no driver, or a binary not built for the device's architecture.
class NoDevice : public Error {
 public:
  explicit NoDevice(const std::string& what) : Error(what, kExitNoDevice) {}
};

// A bad flag, shape or value given by the user.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, kExitUsage) {}
};

// Output paths named on a command line are checked before any work, so that a long run's results
// are never lost to a typo; the check creates and truncates nothing (a run that stops early leaves
// an existing file as it was). "" when `path` can be written as a file: an existing writable file,
// or a new one in an existing writable folder; otherwise why not.
std::string output_file_problem(const std::string& path);
// "" when `path` can be an output folder: an existing writable folder, or one that
// std::filesystem::create_directories can make (its nearest existing ancestor a writable folder).
std::string output_dir_problem(const std::string& path);
// The same, as a UsageError naming the flag: "--json /x/y.json: the folder /x does not exist".
void check_output_file(const std::string& flag, const std::string& path);
void check_output_dir(const std::string& flag, const std::string& path);

// Why there is no usable CUDA device, from what the runtime says (cudaGetDeviceCount's result and
// count, cudaDriverGetVersion's and cudaRuntimeGetVersion's versions): no NVIDIA driver at all, a
// driver too old for this runtime, a driver that sees no GPU, or the runtime's own words.
std::string no_device_reason(cudaError_t count_result, int count, int driver_version, int runtime_version);

// Runs body() and returns its exit status; a lab::Error becomes its one-line message on stderr
// ("error: ...") and its own exit status (usage 2, no device 3, out of memory 4, else 1), any
// other exception the same with status 1. Every program's main goes through here.
int run_reporting_errors(const std::function<int()>& body);

// The architectures this binary was compiled for, e.g. "sm_90" (set by the build).
const char* built_architectures();

namespace detail {
[[noreturn]] void throw_cuda(cudaError_t, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t, const char* expr, const char* file, int line);
const char* cublas_status_name(cublasStatus_t);

inline void check(cudaError_t r, const char* expr, const char* file, int line) {
  if (r != cudaSuccess) throw_cuda(r, expr, file, line);
}
inline void check(cublasStatus_t r, const char* expr, const char* file, int line) {
  if (r != CUBLAS_STATUS_SUCCESS) throw_cublas(r, expr, file, line);
}
}  // namespace detail
}  // namespace lab

// Checks a CUDA runtime, cuBLAS, NVRTC or CUPTI call; throws lab::CudaError (or lab::OutOfMemory)
// naming the call, the file and the line.
#define LAB_CHECK(call) ::lab::detail::check((call), #call, __FILE__, __LINE__)

// After every kernel launch: reports a bad launch configuration or an earlier asynchronous fault.
#define LAB_CHECK_LAUNCH() ::lab::detail::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
