// Vanilla element-wise chain: one kernel per operation, as eager mode runs
// y = gelu(1.5 x + 0.5) * sigmoid(x) + c: x * 1.5, + 0.5, gelu, sigmoid(x), the product, + c.
// Each kernel reads its operands from device memory and writes its result back: six passes and
// 52 bytes an element where 8 are the minimum (the counter bytes_x_minimum), so even with every
// kernel at the copy bandwidth it cannot be faster than 8/52 of the fused one.
// Run: make ch04 && ./ch04_compile_vs_fused/baseline_elementwise_chain
#include "elementwise_chain.cuh"

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
}  // namespace

LAB_VARIANT(ElementwiseChain, baseline, "vanilla: one kernel per operation, intermediates in device memory") {
  if (p.t1.size() != p.n) p.t1 = lab::DeviceBuffer<float>(p.n), p.t2 = lab::DeviceBuffer<float>(p.n);
  const auto blocks = static_cast<unsigned>((p.n + kThreads - 1) / kThreads);
  float *t1 = p.t1.data(), *t2 = p.t2.data(), *y = p.y.data();
  const float* x = p.x.data();
  unary<<<blocks, kThreads, 0, stream>>>(Unary::scale, ElementwiseChain::kA, x, t1, p.n);  // t1 = 1.5 x
  unary<<<blocks, kThreads, 0, stream>>>(Unary::shift, ElementwiseChain::kB, t1, t2, p.n);  // z = t1 + 0.5
  unary<<<blocks, kThreads, 0, stream>>>(Unary::gelu, 0.f, t2, t1, p.n);                    // g = gelu(z)
  unary<<<blocks, kThreads, 0, stream>>>(Unary::sigmoid, 0.f, x, t2, p.n);                  // s = sigmoid(x)
  multiply<<<blocks, kThreads, 0, stream>>>(t1, t2, y, p.n);                                // g * s
  add_bias_in_place<<<blocks, kThreads, 0, stream>>>(y, p.c.data(), p.n, p.cols);           // y += c
  LAB_CHECK_LAUNCH();
  p.moved_bytes = 4.0 * (13.0 * double(p.n) + p.cols);  // 2+2+2+2+3+2 accesses an element, c once
}
