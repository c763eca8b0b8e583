#include "lab/check.hpp"

#include <unistd.h>

#include <filesystem>

#include <iostream>
#include <sstream>

#ifndef LAB_CUDA_ARCHITECTURES
#define LAB_CUDA_ARCHITECTURES "unknown"
#endif

namespace lab {

namespace {
std::string mib(std::size_t b) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << static_cast<double>(b) / (1024.0 * 1024.0) << " MiB";
  return o.str();
}
}  // namespace

int run_reporting_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitWrongResult;
  }
}

OutOfMemory::OutOfMemory(std::size_t wanted, std::size_t free_bytes, std::size_t total_bytes)
    : Error(std::string(kOutOfMemoryMarker) + "out of device memory: wanted " + std::to_string(wanted) + " bytes (" + mib(wanted) + "), " +
                std::to_string(free_bytes) + " bytes free (" + mib(free_bytes) + ") of " + mib(total_bytes),
            kExitOutOfMemory),
      wanted_(wanted),
      free_(free_bytes) {}

OutOfMemory::OutOfMemory(const std::string& message, std::size_t wanted, std::size_t free_bytes)
    : Error(std::string(kOutOfMemoryMarker) + message, kExitOutOfMemory), wanted_(wanted), free_(free_bytes) {}

OutOfMemory OutOfMemory::over_limit(std::size_t wanted, std::size_t used, std::size_t limit) {
  const std::size_t left = used < limit ? limit - used : 0;
  return OutOfMemory("out of device memory under the memory limit (--memory-limit) of " + mib(limit) + ": wanted " +
                         std::to_string(wanted) + " bytes (" + mib(wanted) + "), " + std::to_string(left) +
                         " bytes left (" + mib(left) + ")",
                     wanted, left);
}

const char* built_architectures() { return "sm_" LAB_CUDA_ARCHITECTURES; }

namespace detail {

void throw_cuda(cudaError_t r, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so that cleanup can proceed
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                    cudaGetErrorName(r) + " (" + cudaGetErrorString(r) + ")";
  if (r == cudaErrorMemoryAllocation) {
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(0, free_b, total_b);
  }
  if (r == cudaErrorNoDevice || r == cudaErrorInsufficientDriver || r == cudaErrorNoKernelImageForDevice ||
      r == cudaErrorUnsupportedPtxVersion || r == cudaErrorCallRequiresNewerDriver) {
    throw NoDevice(msg + "; this binary was built for " + built_architectures());
  }
  throw CudaError(msg, static_cast<int>(r));
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

void throw_cublas(cublasStatus_t r, const char* expr, const char* file, int line) {
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " + cublas_status_name(r);
  if (r == CUBLAS_STATUS_ALLOC_FAILED) {
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(0, free_b, total_b);
  }
  throw CudaError(msg, static_cast<int>(r));
}

}  // namespace detail
std::string exit_status_help() {
  return "Exit status: " + std::to_string(kExitOk) + " ok; " + std::to_string(kExitWrongResult) +
         " wrong result or GPU fault; " + std::to_string(kExitUsage) + " bad usage; " + std::to_string(kExitNoDevice) +
         " no usable CUDA device;\n" + std::to_string(kExitOutOfMemory) + " out of device memory.\n";
}

std::string verify_limits_text(const char* conjunction) {
  return std::to_string(static_cast<long long>(kVerifyBytesLimit) >> 30) + " GiB " + conjunction + " " +
         std::to_string(static_cast<long long>(kVerifyFlopsLimit / 1e9)) + " GFLOP";
}


std::string output_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "an empty path";
  std::error_code ec;
  const fs::path p(path);
  const fs::file_status st = fs::status(p, ec);
  if (fs::is_directory(st)) return "a folder, not a file";
  if (fs::exists(st)) return ::access(path.c_str(), W_OK) == 0 ? "" : "the file exists and cannot be written";
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const fs::file_status ps = fs::status(parent, ec);
  if (!fs::exists(ps)) return "the folder " + parent.string() + " does not exist";
  if (!fs::is_directory(ps)) return parent.string() + " is not a folder";
  if (::access(parent.c_str(), W_OK) != 0) return "the folder " + parent.string() + " cannot be written";
  return "";
}

std::string output_dir_problem(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "an empty path";
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(path), ec);
  if (ec) return ec.message();
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return "a file, not a folder";
    return ::access(p.c_str(), W_OK) == 0 ? "" : "the folder cannot be written";
  }
  // The nearest ancestor that exists must be a folder that can be written: create_directories
  // makes the rest.
  fs::path up = p.parent_path();
  while (!up.empty() && !fs::exists(fs::status(up, ec))) {
    if (up == up.parent_path()) break;
    up = up.parent_path();
  }
  const fs::file_status us = fs::status(up, ec);
  if (!fs::is_directory(us)) return up.string() + " is not a folder";
  if (::access(up.c_str(), W_OK) != 0) return "the folder " + up.string() + " cannot be written";
  return "";
}

namespace {
void refuse(const std::string& flag, const std::string& path, const std::string& why) {
  if (!why.empty()) throw UsageError(flag + " " + (path.empty() ? "''" : path) + ": " + why);
}
}  // namespace

void check_output_file(const std::string& flag, const std::string& path) {
  refuse(flag, path, output_file_problem(path));
}

void check_output_dir(const std::string& flag, const std::string& path) { refuse(flag, path, output_dir_problem(path)); }

std::string no_device_reason(cudaError_t count_result, int count, int driver_version, int runtime_version) {
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  if (driver_version == 0) return "no NVIDIA driver is installed (the CUDA driver library, libcuda, was not found)";
  if (driver_version < runtime_version)
    return "the NVIDIA driver supports CUDA " + version(driver_version) + ", older than the CUDA " +
           version(runtime_version) + " runtime this binary was built with: update the driver";
  if (count_result == cudaErrorNoDevice || (count_result == cudaSuccess && count == 0))
    return "the NVIDIA driver (CUDA " + version(driver_version) + ") sees no GPU";
  if (count_result != cudaSuccess)
    return std::string(cudaGetErrorName(count_result)) + ": " + cudaGetErrorString(count_result);
  return "";
}

}  // namespace lab

