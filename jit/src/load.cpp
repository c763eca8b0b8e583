// lab::jit, part 4: loading and launching. A binary is loaded through the driver API
// (cuModuleLoadData, cuLaunchKernel), whose functions are found at run time through the runtime,
// so that nothing links libcuda; Kernel and RowKernel build (generate, compile or take from the
// cache, load) and launch, picking the float4 kernel when every pointer is 16-byte aligned.
#include "lab/jit.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "detail.hpp"
#include "lab/check.hpp"
#include "lab/device.hpp"

namespace lab::jit {

using namespace detail;

std::string device_arch() {
  int device = 0, major = 0, minor = 0;
  LAB_CHECK(cudaGetDevice(&device));
  LAB_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  LAB_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

namespace {

// The driver API functions the loader needs, found through the runtime (no link to libcuda).
struct Driver {
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void**, void**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
};

template <class F>
void entry(const char* symbol, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  LAB_CHECK(cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || !p)
    throw Error(std::string("lab::jit: the driver has no ") + symbol);
  fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    entry("cuModuleLoadData", d.module_load_data);
    entry("cuModuleGetFunction", d.module_get_function);
    entry("cuModuleUnload", d.module_unload);
    entry("cuLaunchKernel", d.launch_kernel);
    entry("cuGetErrorString", d.get_error_string);
    return d;
  }();
  return d;
}

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (driver().get_error_string) driver().get_error_string(r, &text);
  throw CudaError(std::string("lab::jit: ") + what + " failed: " + (text ? text : "unknown error"),
                  static_cast<int>(r));
}

struct Args {
  const float* in[kMaxInputs];
  const float* vec[kMaxColumns];
  float* out;
  unsigned long long n;
  int cols;
};

}  // namespace

struct Kernel::Module {
  CUmodule module = nullptr;
  CUfunction scalar = nullptr, vec4 = nullptr, row = nullptr;
  ~Module() {
    if (module) driver().module_unload(module);
  }
};

Kernel Kernel::build(const Expr& e, Cache& cache, const std::string& name) {
  Kernel k;
  k.source_ = generate(e, name);
  k.arity_ = lab::jit::arity(e);
  LAB_CHECK(cudaFree(nullptr));  // the runtime's context is current before the driver loads into it
  k.binary_ = cache.get(k.source_, device_arch());
  const auto t0 = std::chrono::steady_clock::now();
  k.module_ = std::make_shared<Module>();
  check_cu(driver().module_load_data(&k.module_->module, k.binary_.image.data()), "cuModuleLoadData");
  check_cu(driver().module_get_function(&k.module_->scalar, k.module_->module, (name + "_scalar").c_str()),
           "cuModuleGetFunction(scalar)");
  check_cu(driver().module_get_function(&k.module_->vec4, k.module_->module, (name + "_vec4").c_str()),
           "cuModuleGetFunction(vec4)");
  k.load_ms_ = elapsed_ms(t0);
  return k;
}

void Kernel::launch(const std::vector<const float*>& inputs, const std::vector<const float*>& columns, float* out,
                    std::size_t n, int cols, cudaStream_t stream) const {
  if (static_cast<int>(inputs.size()) != arity_.inputs || static_cast<int>(columns.size()) != arity_.columns)
    throw UsageError("lab::jit::Kernel::launch: the expression reads " + std::to_string(arity_.inputs) +
                     " inputs and " + std::to_string(arity_.columns) + " column vectors; given " +
                     std::to_string(inputs.size()) + " and " + std::to_string(columns.size()));
  if (arity_.columns && cols <= 0) throw UsageError("lab::jit::Kernel::launch: cols must be positive");
  if (n == 0) return;
  Args a{};
  bool aligned = reinterpret_cast<std::uintptr_t>(out) % 16 == 0 && (arity_.columns == 0 || cols % 4 == 0);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    a.in[k] = inputs[k];
    aligned = aligned && reinterpret_cast<std::uintptr_t>(inputs[k]) % 16 == 0;
  }
  for (std::size_t k = 0; k < columns.size(); ++k) {
    a.vec[k] = columns[k];
    aligned = aligned && reinterpret_cast<std::uintptr_t>(columns[k]) % 16 == 0;
  }
  a.out = out;
  a.n = n;
  a.cols = cols;
  constexpr unsigned kThreads = 256;
  const std::size_t work = aligned ? std::max<std::size_t>(1, n / 4) : n;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((work + kThreads - 1) / kThreads, std::size_t{1} << 20));
  void* params[] = {&a};
  check_cu(driver().launch_kernel(aligned ? module_->vec4 : module_->scalar, blocks, 1, 1, kThreads, 1, 1, 0,
                                  reinterpret_cast<CUstream>(stream), params, nullptr),
           "cuLaunchKernel");
}

RowKernel RowKernel::build(RowOp op, const Expr& e, Cache& cache, const std::string& name) {
  RowKernel k;
  k.op_ = op;
  k.source_ = generate_row(op, e, name);
  LAB_CHECK(cudaFree(nullptr));
  k.binary_ = cache.get(k.source_, device_arch());
  const auto t0 = std::chrono::steady_clock::now();
  k.module_ = std::make_shared<Kernel::Module>();
  check_cu(driver().module_load_data(&k.module_->module, k.binary_.image.data()), "cuModuleLoadData");
  const std::string kernel = name + (op == RowOp::softmax ? "_softmax" : "_softmax_backward");
  check_cu(driver().module_get_function(&k.module_->row, k.module_->module, kernel.c_str()), "cuModuleGetFunction(row)");
  k.load_ms_ = elapsed_ms(t0);
  return k;
}

void RowKernel::launch(const float* in, const float* in2, float* out, std::size_t rows, int cols, int rows_per_matrix,
                       cudaStream_t stream) const {
  if (cols <= 0 || rows_per_matrix <= 0) throw UsageError("lab::jit::RowKernel::launch: cols and rows_per_matrix must be positive");
  if ((op_ == RowOp::softmax_backward) != (in2 != nullptr))
    throw UsageError("lab::jit::RowKernel::launch: the softmax backward takes p and dp, the softmax one input");
  if (rows > 0x7fffffffu) throw UsageError("lab::jit::RowKernel::launch: at most 2^31 - 1 rows");
  if (rows == 0) return;
  void* params[] = {&in, &in2, &out, &cols, &rows_per_matrix};
  check_cu(driver().launch_kernel(module_->row, static_cast<unsigned>(rows), 1, 1, 256, 1, 1, 0,
                                  reinterpret_cast<CUstream>(stream), params, nullptr),
           "cuLaunchKernel");
}

}  // namespace lab::jit
