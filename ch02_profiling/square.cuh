// The problem behind the square lesson: y = x^2 over a large fp32 array, written three ways:
// a general power with the exponent known only at run time, powf(x, 2.0f), and x * x. Do they
// compile to the same instructions? The programs time them and `make square_sass` shows their
// machine code (SASS) side by side: on sm_90 with nvcc 13, only x * x becomes a multiply. All three
// read and write the same way (lab::map_vec4: 16-byte accesses, four elements a thread), so the
// arithmetic is the only difference between them.
#pragma once

#include <string>
#include <vector>

#include "lab/lab.hpp"

struct Square {
  static constexpr const char* name = "square";
  static constexpr int chapter = 2;
  static std::vector<std::string> dims() { return {"floats"}; }
  static std::vector<lab::Shape> sweep() { return {{16777216}, {268435456}}; }
  static std::vector<lab::Shape> checks() { return {{1}, {33}, {1000003}}; }
  static lab::Work work(const lab::Shape& s) { return {.bytes = 8.0 * s[0], .flops = double(s[0])}; }
  static std::string validate(const lab::Shape& s) {
    return s[0] > (std::int64_t{1} << 32) ? "at most 4294967296 floats" : "";
  }

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<float> x, y;
    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), y(n) {
      rng.uniform(x, -2.f, 2.f);  // negative bases too: a power must still square them
    }
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = x.download();
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = double(hx[i]) * double(hx[i]);
      // powf is accurate to a few ulp, x * x to half an ulp: both well inside fp32's tolerance.
      return lab::compare(y.download(), ref, lab::Tolerance::fp32(), "y");
    }
  };
};
