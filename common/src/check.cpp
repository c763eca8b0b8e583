#include "lab/check.hpp"

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

}  // namespace lab

