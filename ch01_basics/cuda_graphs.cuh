// The problem behind the CUDA-graphs lesson: a step made of many small, dependent kernels (here
// `kernels` launches of a tiny element-wise update). Each launch from the host costs a few
// microseconds of CPU and driver work; when the kernels themselves take about as long, the GPU
// spends the step waiting for the next launch. A CUDA graph records the whole step once and
// replays it with a single launch, the dependencies resolved on the GPU.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lab/lab.hpp"

struct CudaGraphs {
  static constexpr const char* name = "cuda_graphs";
  static constexpr int chapter = 1;
  static std::vector<std::string> dims() { return {"kernels", "floats"}; }
  static std::vector<lab::Shape> sweep() { return {{1000, 1024}, {1000, 65536}}; }
  static std::vector<lab::Shape> checks() { return {{1, 1}, {7, 1000}, {1000, 1}, {33, 4097}}; }
  // Each kernel reads and writes the array once.
  static lab::Work work(const lab::Shape& s) {
    return {.bytes = 2.0 * s[0] * s[1] * sizeof(float), .flops = 2.0 * s[0] * s[1]};
  }
  static std::string validate(const lab::Shape& s) {
    if (s[0] > 100000) return "at most 100000 kernels";
    if (s[1] > (std::int64_t{1} << 30)) return "at most 1073741824 floats";
    return "";
  }

  static constexpr int kThreads = 256;
  // Kernel k computes x <- x * a(k) + b(k).
  static float a(int k) { return 1.0f - 0.0001f * static_cast<float>(k % 7); }
  static float b(int k) { return 0.0001f * static_cast<float>(k % 5); }

  struct Problem : lab::Problem {
    int kernels;
    std::size_t n;
    lab::DeviceBuffer<float> x;
    std::vector<float> x0;  // the input, kept for the reference

    Problem(const lab::Shape& s, lab::Rng& rng)
        : kernels(static_cast<int>(s[0])), n(static_cast<std::size_t>(s[1])), x(n), x0(n) {
      rng.uniform(std::span<float>(x0), -1.f, 1.f);
      x.upload(x0);
    }
    // The update is in place, so "poisoning" restores the input and the check reads x after the
    // variant: an unapplied kernel leaves a wrong value, not a NaN.
    void poison(cudaStream_t s) override {
      LAB_CHECK(cudaMemcpyAsync(x.data(), x0.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
      LAB_CHECK(cudaStreamSynchronize(s));
    }
    lab::Verdict verify() override {
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) {
        float v = x0[i];
        for (int k = 0; k < kernels; ++k) v = std::fma(v, a(k), b(k));  // the kernels' exact operations
        ref[i] = v;
      }
      return lab::compare(x.download(), ref, lab::Tolerance::exact(), "x");
    }
    std::vector<std::pair<std::string, double>> counters(double seconds, cudaStream_t) override {
      return {{"us_per_kernel", seconds * 1e6 / kernels}};
    }
  };
};

__global__ void cuda_graphs_update(float* x, std::size_t n, float a, float b);

// The step: `kernels` launches, each depending on the one before (same stream, same data).
inline void cuda_graphs_step(CudaGraphs::Problem& p, cudaStream_t s) {
  const auto blocks = static_cast<unsigned>((p.n + CudaGraphs::kThreads - 1) / CudaGraphs::kThreads);
  for (int k = 0; k < p.kernels; ++k) {
    cuda_graphs_update<<<blocks, CudaGraphs::kThreads, 0, s>>>(p.x.data(), p.n, CudaGraphs::a(k), CudaGraphs::b(k));
    LAB_CHECK_LAUNCH();
  }
}
