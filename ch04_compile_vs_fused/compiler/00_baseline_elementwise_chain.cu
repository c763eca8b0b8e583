// Vanilla element-wise chain: one kernel per operation, as eager mode runs
// y = gelu(1.5 x + 0.5) * sigmoid(x) + c: x * 1.5, + 0.5, gelu, sigmoid(x), the product, + c.
// Each kernel reads its operands from device memory and writes its result back: six passes and
// 52 bytes an element where 8 are the minimum (the counter bytes_x_minimum), so even with every
// kernel at the copy bandwidth it cannot be faster than 8/52 of the fused one.
// Run: make ch04 && ./ch04_compile_vs_fused/baseline_elementwise_chain
#include "compiler/elementwise_chain.cuh"

namespace {
constexpr int kThreads = 256;

enum class Unary { scale, shift, gelu, sigmoid };

__global__ void unary(Unary op, float k, const float* __restrict__ in, float* __restrict__ out, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float v = in[i];
  switch (op) {
    case Unary::scale: out[i] = v * k; break;
    case Unary::shift: out[i] = v + k; break;
    case Unary::gelu: out[i] = 0.5f * v * (1.0f + erff(v * ElementwiseChain::kRsqrt2)); break;
    case Unary::sigmoid: out[i] = 1.0f / (1.0f + expf(-v)); break;
  }
}

__global__ void multiply(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                         std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i];
}

__global__ void add_bias_in_place(float* y, const float* __restrict__ bias, std::size_t n, int cols) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] += bias[i % cols];
}

// The variant's intermediates, eager mode's temporary tensors: two of n floats, made before timing
// (a framework's caching allocator would hand them out again on every call), counted in peak_MiB.
struct Eager {
  using Topic = ElementwiseChain;
  lab::DeviceBuffer<float> t1, t2;
  explicit Eager(const ElementwiseChain::Problem& p) : t1(p.n), t2(p.n) {}
  // 2+2+2+2+3+2 accesses an element (each kernel reads its inputs and writes its output), c once.
  static lab::Declared declared() {
    return {.moved_bytes = [](const lab::Shape& s) { return 4.0 * (13.0 * double(s[0]) * double(s[1]) + double(s[1])); }};
  }

  void run(ElementwiseChain::Problem& p, cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>((p.n + kThreads - 1) / kThreads);
    float *a = t1.data(), *b = t2.data(), *y = p.y.data();
    const float* x = p.x.data();
    unary<<<blocks, kThreads, 0, stream>>>(Unary::scale, ElementwiseChain::kA, x, a, p.n);  // t1 = 1.5 x
    unary<<<blocks, kThreads, 0, stream>>>(Unary::shift, ElementwiseChain::kB, a, b, p.n);  // z = t1 + 0.5
    unary<<<blocks, kThreads, 0, stream>>>(Unary::gelu, 0.f, b, a, p.n);                    // g = gelu(z)
    unary<<<blocks, kThreads, 0, stream>>>(Unary::sigmoid, 0.f, x, b, p.n);                 // s = sigmoid(x)
    multiply<<<blocks, kThreads, 0, stream>>>(a, b, y, p.n);                                // g * s
    add_bias_in_place<<<blocks, kThreads, 0, stream>>>(y, p.c.data(), p.n, p.cols);         // y += c
    LAB_CHECK_LAUNCH();
  }
};
}  // namespace

LAB_VARIANT_CLASS(Eager, baseline, "vanilla: one kernel per operation, intermediates in device memory");
