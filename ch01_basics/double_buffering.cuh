// The problem behind the double-buffering lesson: a pipeline that copies data to the GPU, computes
// on it, and copies the result back. Done one stage after the other, the copy engines and the
// SMs take turns and each idles two thirds of the time. Split into chunks over several streams,
// chunk k+1 can travel to the GPU while chunk k is computed and chunk k-1 travels back: the three
// stages overlap, and the whole takes about as long as the slowest stage alone.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lab/lab.hpp"

struct DoubleBuffering {
  static constexpr const char* name = "double_buffering";
  static constexpr int chapter = 1;
  // floats moved each way; FMAs of compute per element (the kernel's weight against the copies).
  static std::vector<std::string> dims() { return {"floats", "fmas"}; }
  // 256 MiB each way: compute twice as long as a copy, about as long, and much shorter.
  static std::vector<lab::Shape> sweep() { return {{67108864, 4096}, {67108864, 2048}, {67108864, 256}}; }
  static std::vector<lab::Shape> checks() { return {{1, 1}, {1000003, 16}, {4097, 300}, {65536, 7}}; }
  static lab::Work work(const lab::Shape& s) {
    return {.bytes = 2.0 * s[0] * sizeof(float), .flops = 2.0 * s[0] * s[1]};
  }
  static std::string validate(const lab::Shape& s) {
    if (s[0] > (std::int64_t{1} << 32)) return "at most 4294967296 floats";
    if (s[1] > 1000000) return "at most 1000000 FMAs per element";
    return "";
  }

  static constexpr float kA = 0.999f, kB = 0.001f;  // x <- x * a + b, kept in [-1, 1]
  static constexpr int kThreads = 256;

  struct Problem : lab::Problem {
    std::size_t n;
    int fmas;
    lab::PinnedBuffer<float> in, out;
    lab::DeviceBuffer<float> dev;
    double ideal_s = -1;      // the slowest stage alone, measured once
    double both_ways_s = -1;  // copying in and out at the same time
    double bus_bound_s = -1;  // the slower of the kernel alone and both copies at once

    Problem(const lab::Shape& s, lab::Rng& rng)
        : n(static_cast<std::size_t>(s[0])), fmas(static_cast<int>(s[1])), in(n), out(n), dev(n) {
      rng.uniform(in.span(), -1.f, 1.f);
    }
    void poison(cudaStream_t s) override {
      lab::poison(dev, s);
      std::fill(out.data(), out.data() + n, std::numeric_limits<float>::quiet_NaN());
    }
    lab::Verdict verify() override {
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) {
        float x = in[i];
        for (int k = 0; k < fmas; ++k) x = std::fma(x, kA, kB);  // the kernel's exact operations
        ref[i] = x;
      }
      return lab::compare(std::span<const float>(out.data(), n), ref, lab::Tolerance::exact(), "out");
    }
    std::vector<std::pair<std::string, double>> counters(double seconds, cudaStream_t s) override;
  };
};

// x <- fma(x, a, b), fmas times, for elements [0, n) of data.
__global__ void double_buffering_compute(float* data, std::size_t n, int fmas);

inline void double_buffering_launch(float* data, std::size_t n, int fmas, cudaStream_t s) {
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + DoubleBuffering::kThreads - 1) / DoubleBuffering::kThreads, 1u << 30));
  double_buffering_compute<<<blocks, DoubleBuffering::kThreads, 0, s>>>(data, n, fmas);
  LAB_CHECK_LAUNCH();
}

// Overlap efficiency: the slowest stage alone (the best any pipeline can do) over the time taken.
// And the bound this machine's bus sets: both copy directions at once share the link, so a
// pipeline cannot beat the time of copying in and out concurrently (nor the kernel alone).
inline std::vector<std::pair<std::string, double>> DoubleBuffering::Problem::counters(double seconds, cudaStream_t s) {
  if (ideal_s < 0) {
    lab::Event a, b, fork, in_done, out_done;
    std::array<lab::Stream, 3> streams;  // copies in and copies out on streams of their own
    const std::size_t bytes = n * sizeof(float);
    auto best = [&](auto&& f) {
      float m = 1e30f;
      for (int i = 0; i < 3; ++i) m = std::min(m, lab::time_once_ms(f, s, a, b));
      return m * 1e-3;
    };
    const double h2d = best([&] { LAB_CHECK(cudaMemcpyAsync(dev.data(), in.data(), bytes, cudaMemcpyHostToDevice, s)); });
    const double kernel = best([&] { double_buffering_launch(dev.data(), n, fmas, s); });
    const double d2h = best([&] { LAB_CHECK(cudaMemcpyAsync(out.data(), dev.data(), bytes, cudaMemcpyDeviceToHost, s)); });
    // Both directions at once, on the pipeline's copy streams (the data is not used afterwards).
    const double both = best([&] {
      fork.record(s);
      for (int k : {0, 2}) LAB_CHECK(cudaStreamWaitEvent(streams[k], fork));
      LAB_CHECK(cudaMemcpyAsync(dev.data(), in.data(), bytes, cudaMemcpyHostToDevice, streams[0]));
      LAB_CHECK(cudaMemcpyAsync(out.data(), dev.data(), bytes, cudaMemcpyDeviceToHost, streams[2]));
      in_done.record(streams[0]);
      out_done.record(streams[2]);
      LAB_CHECK(cudaStreamWaitEvent(s, in_done));
      LAB_CHECK(cudaStreamWaitEvent(s, out_done));
    });
    ideal_s = std::max({h2d, kernel, d2h});
    bus_bound_s = std::max(kernel, both);
    both_ways_s = both;
  }
  return {{"ideal_ms", ideal_s * 1e3},
          {"overlap_%", 100.0 * ideal_s / seconds},
          {"both_ways_ms", both_ways_s * 1e3},
          {"of_bus_bound_%", 100.0 * bus_bound_s / seconds}};
}
