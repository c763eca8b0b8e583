// Seeded random inputs. Every value is a pure function of (seed, fill number, element index): a
// counter-based generator (SplitMix64 at position i), so the host and the device produce the same
// numbers, fills of huge device buffers are one fast kernel, and a logged seed reproduces a run.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "lab/memory.hpp"

#if defined(__CUDACC__)
#define LAB_HD __host__ __device__
#else
#define LAB_HD
#endif

namespace lab {

namespace rng_detail {
LAB_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// The i-th 64-bit output of the fill with key `key`.
LAB_HD inline std::uint64_t bits(std::uint64_t key, std::uint64_t i) {
  return mix64(key + (i + 1) * 0x9E3779B97F4A7C15ull);
}
// Uniform in [lo, hi): 24 random mantissa bits, one fused multiply-add (identical on host and device).
LAB_HD inline float uniform01_to(std::uint64_t b, float lo, float hi) {
  const float u = static_cast<float>(b >> 40) * 0x1p-24f;
  return fmaf(hi - lo, u, lo);
}
// Standard normal by Box-Muller in double, rounded to float.
LAB_HD inline double normal_from(std::uint64_t b) {
  const double u1 = (static_cast<double>(b >> 32) + 1.0) * 0x1p-32;  // (0, 1]
  const double u2 = static_cast<double>(b & 0xFFFFFFFFull) * 0x1p-32;  // [0, 1)
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
// Integer in [lo, hi) by multiply-high (bias below 2^-32 for any range that fits in 32 bits).
LAB_HD inline std::int32_t int_in(std::uint64_t b, std::int32_t lo, std::int32_t hi) {
  const std::uint64_t range = static_cast<std::uint64_t>(static_cast<std::int64_t>(hi) - lo);
  return static_cast<std::int32_t>(lo + static_cast<std::int64_t>(((b >> 32) * range) >> 32));
}
}  // namespace rng_detail

// Device fills (one kernel each, on the given stream).
void device_fill_uniform(float* p, std::size_t n, std::uint64_t key, float lo, float hi, cudaStream_t s);
// bf16, fp16: the numbers the fp32 fill gives, rounded to nearest.
void device_fill_uniform(__nv_bfloat16* p, std::size_t n, std::uint64_t key, float lo, float hi, cudaStream_t s);
void device_fill_uniform(__half* p, std::size_t n, std::uint64_t key, float lo, float hi, cudaStream_t s);
void device_fill_normal(float* p, std::size_t n, std::uint64_t key, float mean, float stddev, cudaStream_t s);
void device_fill_int(std::int32_t* p, std::size_t n, std::uint64_t key, std::int32_t lo, std::int32_t hi,
                     cudaStream_t s);

// A seed and a count of fills made from it: the k-th fill of an Rng gives the same numbers on the
// host and on the device, whatever the buffer.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }

  // Host fills.
  void uniform(std::span<float> out, float lo = -1.f, float hi = 1.f) {
    const auto k = next_key();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = rng_detail::uniform01_to(rng_detail::bits(k, i), lo, hi);
  }
  void normal(std::span<float> out, float mean = 0.f, float stddev = 1.f) {
    const auto k = next_key();
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(mean + stddev * rng_detail::normal_from(rng_detail::bits(k, i)));
  }
  void integers(std::span<std::int32_t> out, std::int32_t lo, std::int32_t hi) {
    const auto k = next_key();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = rng_detail::int_in(rng_detail::bits(k, i), lo, hi);
  }

  // Device fills.
  void uniform(DeviceBuffer<float>& out, float lo = -1.f, float hi = 1.f, cudaStream_t s = nullptr) {
    device_fill_uniform(out.data(), out.size(), next_key(), lo, hi, s);
  }
  void uniform(DeviceBuffer<__nv_bfloat16>& out, float lo = -1.f, float hi = 1.f, cudaStream_t s = nullptr) {
    device_fill_uniform(out.data(), out.size(), next_key(), lo, hi, s);
  }
  void uniform(DeviceBuffer<__half>& out, float lo = -1.f, float hi = 1.f, cudaStream_t s = nullptr) {
    device_fill_uniform(out.data(), out.size(), next_key(), lo, hi, s);
  }
  void normal(DeviceBuffer<float>& out, float mean = 0.f, float stddev = 1.f, cudaStream_t s = nullptr) {
    device_fill_normal(out.data(), out.size(), next_key(), mean, stddev, s);
  }
  // Integers uniform in [lo, hi): hi itself is never drawn.
  void integers(DeviceBuffer<std::int32_t>& out, std::int32_t lo, std::int32_t hi, cudaStream_t s = nullptr) {
    device_fill_int(out.data(), out.size(), next_key(), lo, hi, s);
  }
  // Device fills of n elements from p (a part of a buffer: one tensor of a model's flat parameters).
  void uniform_at(float* p, std::size_t n, float lo, float hi, cudaStream_t s = nullptr) {
    device_fill_uniform(p, n, next_key(), lo, hi, s);
  }
  void normal_at(float* p, std::size_t n, float mean, float stddev, cudaStream_t s = nullptr) {
    device_fill_normal(p, n, next_key(), mean, stddev, s);
  }

 private:
  std::uint64_t next_key() { return rng_detail::mix64(seed_ ^ rng_detail::mix64(++fills_)); }
  std::uint64_t seed_;
  std::uint64_t fills_ = 0;
};

// A seed from the operating system's entropy, for "fresh inputs on every run" (always logged).
std::uint64_t fresh_seed();

}  // namespace lab
