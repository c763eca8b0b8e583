// lab::jit: a small element-wise fusion compiler. Build an expression in C++ from the inputs
// (element-wise arrays), per-column vectors (broadcast along rows) and constants with + - * /,
// exp, log, tanh, erf, sigmoid, sqrt and max; generate() writes one CUDA kernel that computes it in a
// single pass (16-byte loads when the pointers and the row length allow); compile() runs NVRTC
// for an architecture (a cubin for "sm_90", PTX for "compute_90", which needs no GPU); a Cache
// keeps the binaries in memory and on disk, keyed by a hash of the source, the architecture and
// the NVRTC version; Kernel loads the binary through the driver API (found at run time through
// the runtime, so nothing links libcuda) and launches it.
//
//   using namespace lab::jit;
//   const Expr x = Expr::input(0), bias = Expr::column(0);
//   const Expr y = tanh(x * 1.5f + 0.5f) + bias;
//   std::cout << generate(y);                        // reading the source is the lesson
//   Kernel k = Kernel::build(y, Cache::global());     // NVRTC on the first call, the cache after
//   k.launch({x_dev}, {bias_dev}, y_dev, n, cols, stream);
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace lab::jit {

enum class Op {
  input, column, constant, row, col, neg, exp, log, tanh, erf, sigmoid, sqrt, add, sub, mul, div, max, greater, select
};

inline constexpr int kMaxInputs = 8;   // element-wise arrays in0 .. in7
inline constexpr int kMaxColumns = 8;  // per-column vectors vec0 .. vec7

struct Node;

// An expression: a shared, immutable graph (a node used twice is computed once).
class Expr {
 public:
  Expr(float constant);                       // NOLINT: a float is a constant expression
  static Expr input(int index);               // in<index>[i]; throws UsageError beyond kMaxInputs
  static Expr column(int index);              // vec<index>[i % cols]; throws UsageError beyond kMaxColumns
  // The element's row (within its matrix) and column, as floats: row kernels only (the causal mask
  // of a softmax is select(Expr::col() > Expr::row(), -inf, x)).
  static Expr row();
  static Expr col();
  const Node& node() const { return *node_; }
  std::shared_ptr<const Node> ptr() const { return node_; }
  explicit Expr(std::shared_ptr<const Node> n) : node_(std::move(n)) {}

 private:
  std::shared_ptr<const Node> node_;
};

struct Node {
  Op op;
  int index = 0;        // input or column index
  float value = 0.f;    // constant
  std::vector<Expr> args;
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr exp(const Expr& a);
Expr log(const Expr& a);
Expr tanh(const Expr& a);
Expr erf(const Expr& a);
Expr sigmoid(const Expr& a);
Expr sqrt(const Expr& a);  // sqrtf: correctly rounded (nvcc and NVRTC default to -prec-sqrt=true)
Expr max(const Expr& a, const Expr& b);
Expr operator>(const Expr& a, const Expr& b);                        // 1 where a > b, else 0
Expr select(const Expr& condition, const Expr& a, const Expr& b);    // condition != 0 ? a : b

// How many inputs and column vectors the expression reads (highest index + 1).
struct Arity {
  int inputs = 0, columns = 0;
};
Arity arity(const Expr& e);

// Infix text of the expression, e.g. "(tanh(((in0 * 1.5) + 0.5)) + vec0[col])".
std::string to_string(const Expr& e);

// The expression evaluated in double on the host, for references and tests:
// in[k] and vec[k] are the values of input k and column vector k at this element.
double evaluate(const Expr& e, const std::vector<double>& in, const std::vector<double>& vec, double row = 0,
                double col = 0);

// The CUDA source: a device function for one element, a scalar kernel `<name>_scalar` and a
// float4 kernel `<name>_vec4`, both grid-stride, both taking one Args struct by value. Throws
// UsageError when the expression reads Expr::row() or Expr::col().
std::string generate(const Expr& e, const std::string& name = "lab_jit");

// Row kernels: what a compiler of element-wise operations does around a reduction it knows (as
// Inductor fuses point-wise operations into a softmax). The expression reads input(0) (and
// row(), col()); nothing else.
//   softmax:          out[r][j] = softmax_j(e(in[r][j], r, j)): e is fused into the softmax's reads
//                     (a prologue), computed twice (two passes over the row), never stored.
//   softmax_backward: out[r][j] = e(p[r][j] (dp[r][j] - sum_k p[r][k] dp[r][k]), r, j): e is fused
//                     into the gradient's write (an epilogue).
// One block a row; r is the row within its matrix (row % rows_per_matrix). Kernel `<name>_softmax`
// or `<name>_softmax_backward`.
enum class RowOp { softmax, softmax_backward };
std::string generate_row(RowOp op, const Expr& e, const std::string& name = "lab_jit");

// A compiled binary.
struct Binary {
  std::string arch;          // "sm_90" (cubin) or "compute_90" (PTX)
  std::vector<char> image;   // the cubin, or the PTX text
  std::string log;           // NVRTC's log (warnings)
  double compile_ms = 0;     // NVRTC time; 0 when it came from a cache
  bool from_memory = false, from_disk = false;
};

// The NVRTC version, "13.0".
std::string nvrtc_version();

// Compiles CUDA source with NVRTC for arch. Throws Error with NVRTC's log when it does not compile.
Binary compile(const std::string& source, const std::string& arch);

// The cache key: FNV-1a 64 of the source, the architecture and the NVRTC version, in hex.
std::string cache_key(const std::string& source, const std::string& arch);

// Binaries by key, in memory and (when dir is not empty) in files dir/<key>-<arch>.<cubin|ptx>,
// written atomically (a temporary file renamed), so concurrent programs never read half a file.
class Cache {
 public:
  explicit Cache(std::filesystem::path dir);
  static Cache& global();  // lab::cache_dir()/jit; $LAB_JIT_CACHE=off keeps it in memory only
  Binary get(const std::string& source, const std::string& arch);
  const std::filesystem::path& dir() const { return dir_; }
  int compiles() const { return compiles_; }  // NVRTC runs so far

 private:
  std::filesystem::path dir_;
  std::map<std::string, Binary> memory_;
  std::mutex mutex_;
  int compiles_ = 0;
};

// The architecture NVRTC should target for the current device, "sm_90".
std::string device_arch();

// A kernel pair loaded for the current device.
class Kernel {
 public:
  // Generates, compiles (through the cache) and loads the expression's kernels.
  static Kernel build(const Expr& e, Cache& cache, const std::string& name = "lab_jit");

  // out[i] = e(inputs[k][i], columns[k][i % cols]) for i < n. The float4 kernel runs when every
  // pointer is 16-byte aligned and cols is a multiple of 4 (or there are no column vectors). out may
  // be one of the inputs (in place): element i is read only by the thread that writes out[i].
  // Throws UsageError when the pointer counts do not match the expression.
  void launch(const std::vector<const float*>& inputs, const std::vector<const float*>& columns, float* out,
              std::size_t n, int cols, cudaStream_t stream) const;

  const std::string& source() const { return source_; }
  const Binary& binary() const { return binary_; }
  double load_ms() const { return load_ms_; }
  Arity arity() const { return arity_; }

 private:
  friend class RowKernel;
  struct Module;
  std::shared_ptr<Module> module_;
  std::string source_;
  Binary binary_;
  Arity arity_;
  double load_ms_ = 0;
};

// A row kernel loaded for the current device.
class RowKernel {
 public:
  static RowKernel build(RowOp op, const Expr& e, Cache& cache, const std::string& name = "lab_jit");
  // softmax: in = the matrix, in2 = nullptr; softmax_backward: in = p, in2 = dp. rows x cols,
  // row-major, out may not alias the inputs.
  void launch(const float* in, const float* in2, float* out, std::size_t rows, int cols, int rows_per_matrix,
              cudaStream_t stream) const;
  const std::string& source() const { return source_; }
  const Binary& binary() const { return binary_; }
  double load_ms() const { return load_ms_; }

 private:
  RowOp op_ = RowOp::softmax;
  std::shared_ptr<Kernel::Module> module_;
  std::string source_;
  Binary binary_;
  double load_ms_ = 0;
};

}  // namespace lab::jit
