#include "lab/jit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>

#include <unistd.h>

#include <cuda.h>
#include <nvrtc.h>

#include "lab/check.hpp"
#include "lab/check_nvrtc.hpp"
#include "lab/device.hpp"

namespace lab::jit {

namespace {

Expr make(Op op, std::vector<Expr> args) {
  auto n = std::make_shared<Node>();
  n->op = op;
  n->args = std::move(args);
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A float as a C++ literal that reads back to the same bits ("0x1.8p+0f"), or an expression for
// the values that have no literal.
std::string literal(float v) {
  if (std::isnan(v)) return "__int_as_float(0x7fffffff)";
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", double(v));
  return buf;
}

const char* symbol(Op op) {
  switch (op) {
    case Op::add: return "+";
    case Op::sub: return "-";
    case Op::mul: return "*";
    case Op::div: return "/";
    default: return "?";
  }
}

// prefix followed by a number ("t12"); built by appending (GCC 12 warns, wrongly, on "t" + string).
std::string numbered(const char* prefix, long long k) {
  std::string s = prefix;
  s += std::to_string(k);
  return s;
}

// Each distinct node in evaluation order (arguments first), visited once.
void topological(const Node* n, std::vector<const Node*>& order, std::unordered_map<const Node*, int>& seen) {
  if (seen.count(n)) return;
  for (const Expr& a : n->args) topological(&a.node(), order, seen);
  seen[n] = static_cast<int>(order.size());
  order.push_back(n);
}

}  // namespace

Expr::Expr(float constant) {
  auto n = std::make_shared<Node>();
  n->op = Op::constant;
  n->value = constant;
  node_ = std::move(n);
}

namespace {
// An input or column-vector leaf; `what` names it in the error for an index beyond `count`.
Expr leaf(Op op, int index, int count, const char* what) {
  if (index < 0 || index >= count)
    throw UsageError(std::string("lab::jit::Expr::") + (op == Op::input ? "input(" : "column(") +
                     std::to_string(index) + "): " + what + " are 0.." + std::to_string(count - 1));
  auto n = std::make_shared<Node>();
  n->op = op;
  n->index = index;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}
}  // namespace

Expr Expr::input(int index) { return leaf(Op::input, index, kMaxInputs, "inputs"); }
Expr Expr::column(int index) { return leaf(Op::column, index, kMaxColumns, "column vectors"); }
Expr Expr::row() { return make(Op::row, {}); }
Expr Expr::col() { return make(Op::col, {}); }

Expr operator+(const Expr& a, const Expr& b) { return make(Op::add, {a, b}); }
Expr operator-(const Expr& a, const Expr& b) { return make(Op::sub, {a, b}); }
Expr operator*(const Expr& a, const Expr& b) { return make(Op::mul, {a, b}); }
Expr operator/(const Expr& a, const Expr& b) { return make(Op::div, {a, b}); }
Expr operator-(const Expr& a) { return make(Op::neg, {a}); }
Expr exp(const Expr& a) { return make(Op::exp, {a}); }
Expr log(const Expr& a) { return make(Op::log, {a}); }
Expr tanh(const Expr& a) { return make(Op::tanh, {a}); }
Expr erf(const Expr& a) { return make(Op::erf, {a}); }
Expr sigmoid(const Expr& a) { return make(Op::sigmoid, {a}); }
Expr sqrt(const Expr& a) { return make(Op::sqrt, {a}); }
Expr max(const Expr& a, const Expr& b) { return make(Op::max, {a, b}); }
Expr operator>(const Expr& a, const Expr& b) { return make(Op::greater, {a, b}); }
Expr select(const Expr& condition, const Expr& a, const Expr& b) { return make(Op::select, {condition, a, b}); }

Arity arity(const Expr& e) {
  std::vector<const Node*> order;
  std::unordered_map<const Node*, int> seen;
  topological(&e.node(), order, seen);
  Arity a;
  for (const Node* n : order) {
    if (n->op == Op::input) a.inputs = std::max(a.inputs, n->index + 1);
    if (n->op == Op::column) a.columns = std::max(a.columns, n->index + 1);
  }
  return a;
}

std::string to_string(const Expr& e) {
  const Node& n = e.node();
  switch (n.op) {
    case Op::input: return "in" + std::to_string(n.index);
    case Op::column: return "vec" + std::to_string(n.index) + "[col]";
    case Op::row: return "row";
    case Op::col: return "col";
    case Op::constant: {
      std::ostringstream s;
      s << n.value;
      return s.str();
    }
    case Op::neg: return "-" + to_string(n.args[0]);
    case Op::exp: return "exp(" + to_string(n.args[0]) + ")";
    case Op::log: return "log(" + to_string(n.args[0]) + ")";
    case Op::tanh: return "tanh(" + to_string(n.args[0]) + ")";
    case Op::erf: return "erf(" + to_string(n.args[0]) + ")";
    case Op::sigmoid: return "sigmoid(" + to_string(n.args[0]) + ")";
    case Op::sqrt: return "sqrt(" + to_string(n.args[0]) + ")";
    case Op::max: return "max(" + to_string(n.args[0]) + ", " + to_string(n.args[1]) + ")";
    case Op::greater: return "(" + to_string(n.args[0]) + " > " + to_string(n.args[1]) + ")";
    case Op::select:
      return "select(" + to_string(n.args[0]) + ", " + to_string(n.args[1]) + ", " + to_string(n.args[2]) + ")";
    default: return "(" + to_string(n.args[0]) + " " + symbol(n.op) + " " + to_string(n.args[1]) + ")";
  }
}

double evaluate(const Expr& e, const std::vector<double>& in, const std::vector<double>& vec, double row, double col) {
  const Node& n = e.node();
  auto arg = [&](int k) { return evaluate(n.args[static_cast<std::size_t>(k)], in, vec, row, col); };
  switch (n.op) {
    case Op::input: return in.at(static_cast<std::size_t>(n.index));
    case Op::column: return vec.at(static_cast<std::size_t>(n.index));
    case Op::row: return row;
    case Op::col: return col;
    case Op::greater: return arg(0) > arg(1) ? 1.0 : 0.0;
    case Op::select: return arg(0) != 0 ? arg(1) : arg(2);
    case Op::constant: return n.value;
    case Op::neg: return -arg(0);
    case Op::exp: return std::exp(arg(0));
    case Op::log: return std::log(arg(0));
    case Op::tanh: return std::tanh(arg(0));
    case Op::erf: return std::erf(arg(0));
    case Op::sigmoid: return 1.0 / (1.0 + std::exp(-arg(0)));
    case Op::sqrt: return std::sqrt(arg(0));
    case Op::add: return arg(0) + arg(1);
    case Op::sub: return arg(0) - arg(1);
    case Op::mul: return arg(0) * arg(1);
    case Op::div: return arg(0) / arg(1);
    case Op::max: return std::max(arg(0), arg(1));
  }
  return NAN;
}

namespace {

bool reads_position(const Expr& e) {
  std::vector<const Node*> order;
  std::unordered_map<const Node*, int> seen;
  topological(&e.node(), order, seen);
  return std::any_of(order.begin(), order.end(), [](const Node* n) { return n->op == Op::row || n->op == Op::col; });
}

// `static __device__ float <name>_element(params) { one const per node; return the root; }`.
void element_function(std::ostringstream& s, const Expr& e, const std::string& name, const std::string& params) {
  std::vector<const Node*> order;
  std::unordered_map<const Node*, int> seen;
  topological(&e.node(), order, seen);
  auto var = [&](const Expr& x) { return numbered("t", seen.at(&x.node())); };
  s << "static __device__ __forceinline__ float " << name << "_element(" << params << ") {\n";
  for (const Node* n : order) {
    const std::string t = numbered("t", seen.at(n));
    s << "  const float " << t << " = ";
    switch (n->op) {
      case Op::input: s << "in" << n->index; break;
      case Op::column: s << "vec" << n->index; break;
      case Op::row: s << "row"; break;
      case Op::col: s << "col"; break;
      case Op::constant: s << literal(n->value); break;
      case Op::neg: s << "-" << var(n->args[0]); break;
      case Op::exp: s << "expf(" << var(n->args[0]) << ")"; break;
      case Op::log: s << "logf(" << var(n->args[0]) << ")"; break;
      case Op::tanh: s << "tanhf(" << var(n->args[0]) << ")"; break;
      case Op::erf: s << "erff(" << var(n->args[0]) << ")"; break;
      case Op::sigmoid: s << "1.0f / (1.0f + expf(-" << var(n->args[0]) << "))"; break;
      case Op::sqrt: s << "sqrtf(" << var(n->args[0]) << ")"; break;
      case Op::max: s << "fmaxf(" << var(n->args[0]) << ", " << var(n->args[1]) << ")"; break;
      case Op::greater: s << "(" << var(n->args[0]) << " > " << var(n->args[1]) << ") ? 1.0f : 0.0f"; break;
      case Op::select:
        s << "(" << var(n->args[0]) << " != 0.0f) ? " << var(n->args[1]) << " : " << var(n->args[2]);
        break;
      default: s << var(n->args[0]) << " " << symbol(n->op) << " " << var(n->args[1]); break;
    }
    s << ";\n";
  }
  s << "  return " << var(e) << ";\n}\n\n";
}

}  // namespace

std::string generate(const Expr& e, const std::string& name) {
  if (reads_position(e))
    throw UsageError("lab::jit::generate: " + to_string(e) + " reads row() or col(), which only row kernels define");
  const Arity a = arity(e);

  std::ostringstream s;
  s << "// Generated by lab::jit for: " << to_string(e) << "\n"
    << "// One pass: every input element is read once (__ldg, the read-only data path: out may be an\n"
    << "// input, as each element is read only by the thread that then writes it), the output written\n"
    << "// once; the intermediates live in registers.\n"
    << "struct LabJitArgs {\n"
    << "  const float* in[" << kMaxInputs << "];\n"
    << "  const float* vec[" << kMaxColumns << "];\n"
    << "  float* out;\n"
    << "  unsigned long long n;\n"
    << "  int cols;\n"
    << "};\n\n";
  std::string params;
  for (int k = 0; k < a.inputs; ++k) params += (params.empty() ? "" : ", ") + numbered("float in", k);
  for (int k = 0; k < a.columns; ++k) params += (params.empty() ? "" : ", ") + numbered("float vec", k);
  element_function(s, e, name, params);

  auto call = [&](const std::string& idx, const std::string& col) {
    std::string c = name + "_element(";
    std::vector<std::string> args;
    for (int k = 0; k < a.inputs; ++k) args.push_back(numbered("__ldg(a.in[", k) + "] + " + idx + ")");
    for (int k = 0; k < a.columns; ++k) args.push_back(numbered("__ldg(a.vec[", k) + "] + " + col + ")");
    for (std::size_t k = 0; k < args.size(); ++k) c += (k ? ", " : "") + args[k];
    return c + ")";
  };
  const std::string col = a.columns ? "i % a.cols" : "0";
  s << "// One thread per element, grid-stride.\n"
    << "extern \"C\" __global__ void " << name << "_scalar(const LabJitArgs a) {\n"
    << "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    << "  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride)\n"
    << "    a.out[i] = " << call("i", col) << ";\n"
    << "}\n\n";

  s << "// Four elements a thread with 16-byte loads and stores (pointers 16-byte aligned, cols a multiple of 4),\n"
    << "// grid-stride; the last n % 4 elements one by one.\n"
    << "extern \"C\" __global__ void " << name << "_vec4(const LabJitArgs a) {\n"
    << "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x, quads = a.n / 4;\n"
    << "  for (unsigned long long q = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += stride) {\n";
  // The streamed inputs' loads first: the column's 64-bit remainder then runs under their latency.
  for (int k = 0; k < a.inputs; ++k)
    s << "    const float4 x" << k << " = __ldg(reinterpret_cast<const float4*>(a.in[" << k << "]) + q);\n";
  if (a.columns) s << "    const unsigned long long c = (4 * q) % a.cols;\n";
  for (int k = 0; k < a.columns; ++k)
    s << "    const float4 v" << k << " = __ldg(reinterpret_cast<const float4*>(a.vec[" << k << "] + c));\n";
  s << "    float4 r;\n";
  for (const char* lane : {"x", "y", "z", "w"}) {
    s << "    r." << lane << " = " << name << "_element(";
    const char* sep = "";
    for (int k = 0; k < a.inputs; ++k, sep = ", ") s << sep << 'x' << k << '.' << lane;
    for (int k = 0; k < a.columns; ++k, sep = ", ") s << sep << 'v' << k << '.' << lane;
    s << ");\n";
  }
  s << "    reinterpret_cast<float4*>(a.out)[q] = r;\n"
    << "  }\n"
    << "  for (unsigned long long i = 4 * quads + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride)\n"
    << "    a.out[i] = " << call("i", col) << ";\n"
    << "}\n";
  return s.str();
}

std::string generate_row(RowOp op, const Expr& e, const std::string& name) {
  const Arity a = arity(e);
  if (a.inputs > 1 || a.columns > 0)
    throw UsageError("lab::jit::generate_row: " + to_string(e) + " may read input(0), row() and col() only");
  const bool forward = op == RowOp::softmax;
  std::ostringstream s;
  s << "// Generated by lab::jit: " << (forward ? "softmax over each row of e(x)" : "softmax backward, e(dx)")
    << " for e = " << to_string(e) << "\n"
    << (forward ? "// e is a prologue: computed from the stored x as it is read, in both passes, never stored.\n"
                : "// e is an epilogue: applied to the gradient p (dp - sum p dp) before it is written.\n")
    << "// One block of 256 threads a row; row is the row within its matrix, col the column.\n"
    << "#define LAB_NEG_INF __int_as_float(0xff800000)\n\n";
  element_function(s, e, name, "float in0, float row, float col");
  s << "static __device__ __forceinline__ float2 " << name << "_combine(float2 a, float2 b) {  // (max, sum exp(x - max))\n"
    << "  const float m = fmaxf(a.x, b.x);\n"
    << "  if (m == LAB_NEG_INF) return make_float2(m, 0.f);\n"
    << "  return make_float2(m, a.y * __expf(a.x - m) + b.y * __expf(b.x - m));\n"
    << "}\n\n";
  const std::string kernel = name + (forward ? "_softmax" : "_softmax_backward");
  s << "extern \"C\" __global__ void __launch_bounds__(256) " << kernel
    << "(const float* __restrict__ in, const float* __restrict__ in2, float* __restrict__ out, int cols,\n"
    << "    int rows_per_matrix) {\n"
    << "  const unsigned long long r = blockIdx.x;\n"
    << "  const float row = (float)(r % (unsigned long long)rows_per_matrix);\n"
    << "  const float* x = in + r * cols;\n"
    << "  float* y = out + r * cols;\n"
    << "  __shared__ float2 warps[8];\n";
  if (forward) {
    s << "  float2 t = make_float2(LAB_NEG_INF, 0.f);\n"
      << "  for (int j = threadIdx.x; j < cols; j += blockDim.x)\n"
      << "    t = " << name << "_combine(t, make_float2(" << name << "_element(__ldg(x + j), row, (float)j), 1.f));\n"
      << "  for (int o = 16; o > 0; o /= 2)\n"
      << "    t = " << name << "_combine(t, make_float2(__shfl_xor_sync(~0u, t.x, o), __shfl_xor_sync(~0u, t.y, o)));\n"
      << "  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = t;\n"
      << "  __syncthreads();\n"
      << "  float2 all = warps[0];\n"
      << "  for (int w = 1; w < 8; ++w) all = " << name << "_combine(all, warps[w]);\n"
      << "  const float inv = 1.f / all.y;\n"
      << "  for (int j = threadIdx.x; j < cols; j += blockDim.x)\n"
      << "    y[j] = __expf(" << name << "_element(__ldg(x + j), row, (float)j) - all.x) * inv;\n";
  } else {
    s << "  const float* dx = in2 + r * cols;\n"
      << "  float t = 0.f;\n"
      << "  for (int j = threadIdx.x; j < cols; j += blockDim.x) t += __ldg(x + j) * __ldg(dx + j);\n"
      << "  for (int o = 16; o > 0; o /= 2) t += __shfl_xor_sync(~0u, t, o);\n"
      << "  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32].x = t;\n"
      << "  __syncthreads();\n"
      << "  float dot = 0.f;\n"
      << "  for (int w = 0; w < 8; ++w) dot += warps[w].x;\n"
      << "  for (int j = threadIdx.x; j < cols; j += blockDim.x) {\n"
      << "    const float p = __ldg(x + j);\n"
      << "    y[j] = " << name << "_element(p * (__ldg(dx + j) - dot), row, (float)j);\n"
      << "  }\n";
  }
  s << "}\n";
  return s.str();
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  LAB_CHECK(nvrtcVersion(&major, &minor));
  return std::to_string(major) + "." + std::to_string(minor);
}

Binary compile(const std::string& source, const std::string& arch) {
  const bool cubin = arch.rfind("sm_", 0) == 0;
  if (!cubin && arch.rfind("compute_", 0) != 0)
    throw UsageError("lab::jit::compile: architecture '" + arch + "': expected sm_NN (cubin) or compute_NN (PTX)");
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  LAB_CHECK(nvrtcCreateProgram(&prog, source.c_str(), "lab_jit.cu", 0, nullptr, nullptr));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const std::string arch_flag = "--gpu-architecture=" + arch;
  const char* options[] = {arch_flag.c_str(), "--std=c++17"};
  const nvrtcResult result = nvrtcCompileProgram(prog, 2, options);
  Binary b;
  b.arch = arch;
  std::size_t log_size = 0;
  LAB_CHECK(nvrtcGetProgramLogSize(prog, &log_size));
  b.log.resize(log_size);
  if (log_size) LAB_CHECK(nvrtcGetProgramLog(prog, b.log.data()));
  while (!b.log.empty() && (b.log.back() == '\0' || b.log.back() == '\n')) b.log.pop_back();
  if (result != NVRTC_SUCCESS)
    throw Error("lab::jit: NVRTC could not compile the generated kernel for " + arch + " (" +
                nvrtcGetErrorString(result) + "):\n" + b.log);
  std::size_t size = 0;
  if (cubin) {
    LAB_CHECK(nvrtcGetCUBINSize(prog, &size));
    b.image.resize(size);
    LAB_CHECK(nvrtcGetCUBIN(prog, b.image.data()));
  } else {
    LAB_CHECK(nvrtcGetPTXSize(prog, &size));
    b.image.resize(size);
    LAB_CHECK(nvrtcGetPTX(prog, b.image.data()));
  }
  b.compile_ms = elapsed_ms(t0);
  return b;
}

std::string cache_key(const std::string& source, const std::string& arch) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator no text contains
  };
  mix(source);
  mix(arch);
  mix(nvrtc_version());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Cache::Cache(std::filesystem::path dir) : dir_(std::move(dir)) {}

Cache& Cache::global() {
  static Cache cache([] {
    const char* env = std::getenv("LAB_JIT_CACHE");
    if (env && std::string(env) == "off") return std::filesystem::path();
    return lab::cache_dir() / "jit";
  }());
  return cache;
}

Binary Cache::get(const std::string& source, const std::string& arch) {
  std::lock_guard lock(mutex_);
  const std::string key = cache_key(source, arch) + "-" + arch;
  if (auto it = memory_.find(key); it != memory_.end()) {
    Binary b = it->second;
    b.compile_ms = 0, b.from_memory = true, b.from_disk = false;
    return b;
  }
  const bool cubin = arch.rfind("sm_", 0) == 0;
  const std::filesystem::path file = dir_.empty() ? dir_ : dir_ / (key + (cubin ? ".cubin" : ".ptx"));
  if (!dir_.empty()) {
    std::ifstream f(file, std::ios::binary);
    if (f) {
      Binary b;
      b.arch = arch;
      b.image.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      if (!b.image.empty()) {
        b.from_disk = true;
        memory_[key] = b;
        return b;
      }
    }
  }
  Binary b = compile(source, arch);
  ++compiles_;
  memory_[key] = b;
  if (!dir_.empty()) {  // best effort: a cache that cannot be written only costs the next compile
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::filesystem::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(b.image.data(), static_cast<std::streamsize>(b.image.size()));
    }
    std::filesystem::rename(tmp, file, ec);
    if (ec) std::filesystem::remove(tmp, ec);
  }
  return b;
}

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
