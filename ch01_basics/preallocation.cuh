// The problem behind the preallocation lesson: a step that needs scratch memory for its
// intermediates (here y = (x*a + b) * (x*a), through two temporaries). cudaMalloc is not a
// cheap call: it may map new pages into the GPU's address space, and cudaFree waits for the
// whole device to go idle before it returns memory. Inside a step that runs thousands of times,
// those calls can cost more than the kernels.
#pragma once

#include <string>
#include <vector>

#include "lab/lab.hpp"

struct Preallocation {
  static constexpr const char* name = "preallocation";
  static constexpr int chapter = 1;
  static std::vector<std::string> dims() { return {"floats"}; }
  static std::vector<lab::Shape> sweep() { return {{1048576}, {16777216}, {67108864}}; }
  static std::vector<lab::Shape> checks() { return {{1}, {1000003}, {4097}}; }
  // Three kernels: read x, write t1; read t1, write t2; read t1 and t2, write y.
  static lab::Work work(const lab::Shape& s) { return {.bytes = 6.0 * s[0] * sizeof(float), .flops = 3.0 * s[0]}; }
  static std::string validate(const lab::Shape& s) {
    return s[0] > (std::int64_t{1} << 31) ? "at most 2147483648 floats" : "";
  }

  static constexpr float kA = 1.5f, kB = 0.25f;
  static constexpr int kThreads = 256;

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<float> x, y;

    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), y(n) { rng.uniform(x); }
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = x.download();
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) {
        const float t1v = hx[i] * kA, t2v = t1v + kB;  // the kernels' exact fp32 operations
        ref[i] = t2v * t1v;
      }
      return lab::compare(y.download(), ref, lab::Tolerance::exact(), "y");
    }
  };
};

// The step's three kernels, on scratch buffers t1 and t2 wherever they come from.
void preallocation_kernels(const float* x, float* t1, float* t2, float* y, std::size_t n, cudaStream_t s);
