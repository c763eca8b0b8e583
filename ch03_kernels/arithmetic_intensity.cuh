// The problem behind the arithmetic-intensity ladder: K = 12 element-wise update steps
// x <- a_k * x + b_k over a large fp32 array, written five ways that all compute the same output.
// The minimal work is one read and one write per element (8 bytes) and K fused multiply-adds (2K
// FLOPs): an arithmetic intensity of 2K / 8 = 3 FLOP/byte. A version that runs one kernel per step
// moves 8 bytes per element per step and has an intensity of 2 / 8 = 0.25: twelve times the
// traffic for the same answer. The variants climb from one to the other, one change at a time.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "lab/lab.hpp"

namespace ai {

constexpr int kSteps = 12;

// The steps' coefficients, literal so that host (reference) and device use the same floats.
__host__ __device__ constexpr float coef_a(int k) {
  constexpr float a[kSteps] = {0.97f, 1.02f, 0.99f, 1.01f, 0.98f, 1.03f, 0.96f, 1.04f, 1.00f, 0.995f, 1.005f, 0.985f};
  return a[k];
}
__host__ __device__ constexpr float coef_b(int k) {
  constexpr float b[kSteps] = {0.01f, -0.02f, 0.03f, -0.01f, 0.02f, -0.03f, 0.015f, -0.025f, 0.005f, -0.005f, 0.02f, -0.01f};
  return b[k];
}

// Steps First .. First + Count - 1 on one value: the coefficients are compile-time constants.
template <int First, int Count>
__device__ __forceinline__ float steps(float x) {
#pragma unroll
  for (int j = 0; j < Count; ++j) x = fmaf(coef_a(First + j), x, coef_b(First + j));
  return x;
}

// Calls f.template operator()<K>() for K = 0 .. N - 1, in order: one launch per step, each step's
// coefficients known at compile time.
template <int N, class F>
void for_each_step(F&& f) {
  [&]<int... K>(std::integer_sequence<int, K...>) { (f.template operator()<K>(), ...); }(std::make_integer_sequence<int, N>{});
}

// Steps First .. First + Count - 1 over the array with 16-byte loads and stores (four elements a
// thread), grid-stride; the n % 4 tail element by element. `in` may equal `out` (a pass in place).
template <int First, int Count>
__global__ void steps_vec4(const float* in, float* out, std::size_t n) {
  const std::size_t n4 = n / 4, stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (std::size_t i = first; i < n4; i += stride) {
    float4 v = reinterpret_cast<const float4*>(in)[i];
    v = make_float4(steps<First, Count>(v.x), steps<First, Count>(v.y), steps<First, Count>(v.z),
                    steps<First, Count>(v.w));
    reinterpret_cast<float4*>(out)[i] = v;
  }
  for (std::size_t i = 4 * n4 + first; i < n; i += stride) out[i] = steps<First, Count>(in[i]);
}

// What a variant declares: it makes `k` passes over memory, each reading and writing every element
// (8 bytes), where the minimum is one pass.
inline lab::Declared passes(int k) {
  return {.moved_bytes = [k](const lab::Shape& s) { return 8.0 * double(s[0]) * k; }};
}

}  // namespace ai

struct ArithmeticIntensity {
  static constexpr const char* name = "arithmetic_intensity";
  static constexpr int chapter = 3;
  static std::vector<std::string> dims() { return {"floats"}; }
  // 2^22 floats (16 MiB a buffer) fit the H100's 50 MB L2; 2^28 (1 GiB) do not. See the README.
  static std::vector<lab::Shape> sweep() { return {{4194304}, {268435456}}; }
  static std::vector<lab::Shape> checks() { return {{1}, {3}, {4097}, {1000003}}; }
  static lab::Work work(const lab::Shape& s) {
    return {.bytes = 8.0 * double(s[0]), .flops = 2.0 * ai::kSteps * double(s[0])};
  }
  static std::string validate(const lab::Shape& s) {
    return s[0] > (std::int64_t{1} << 32) ? "at most 4294967296 floats" : "";
  }
  static constexpr int kThreads = 256;

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<float> x, y;  // x is never written: every run starts from it

    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), y(n) {
      rng.uniform(x, -2.f, 2.f);
    }
    // Blocks for the float4 kernel: one quad per thread up to a cap, grid-stride beyond it.
    unsigned vec4_blocks() const {
      const std::size_t quads = std::max<std::size_t>(1, (n + 3) / 4);
      return static_cast<unsigned>(std::min<std::size_t>((quads + kThreads - 1) / kThreads, std::size_t{1} << 20));
    }
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = x.download();
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) {
        double v = hx[i];
        for (int k = 0; k < ai::kSteps; ++k) v = double(ai::coef_a(k)) * v + double(ai::coef_b(k));
        ref[i] = v;
      }
      // Twelve fp32 roundings, against one double chain: well inside fp32's tolerance.
      return lab::compare(y.download(), ref, lab::Tolerance::fp32(), "y");
    }
    // The variant's passes over memory (it declares them: ai::passes) and its own intensity.
    std::vector<std::pair<std::string, double>> counters(double, cudaStream_t) override {
      if (!declared().moved_bytes) return {};
      const double moved = declared().moved_bytes(lab::Shape{std::int64_t(n)});
      return {{"passes", moved / (8.0 * double(n))}, {"AI_FLOP/byte", 2.0 * ai::kSteps * double(n) / moved}};
    }
  };
};
