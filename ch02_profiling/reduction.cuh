// The problem behind the reduction lesson: the mean of a large fp32 array. Every element is read
// once and the arithmetic is one add each, so a good reduction runs at the speed of reading
// memory. What separates a slow one from a fast one is how much of the GPU takes part in the
// reading and how the partial sums are combined.
#pragma once

#include <string>
#include <vector>

#include "lab/lab.hpp"

struct Reduction {
  static constexpr const char* name = "reduction";
  static constexpr int chapter = 2;
  static std::vector<std::string> dims() { return {"floats"}; }
  static std::vector<lab::Shape> sweep() { return {{16777216}, {67108864}, {268435456}}; }
  // One element, a prime, counts that are not multiples of 4 (the vector width) or of a block.
  static std::vector<lab::Shape> checks() { return {{1}, {31}, {4097}, {1000003}, {1048577}, {16777219}}; }
  static lab::Work work(const lab::Shape& s) { return {.bytes = 4.0 * s[0] + 4.0, .flops = double(s[0])}; }
  static std::string validate(const lab::Shape& s) {
    return s[0] > (std::int64_t{1} << 32) ? "at most 4294967296 floats" : "";
  }
  // fp32's tolerance (the division by n) plus the sum's: n positive terms added in any order,
  // sum_error(n) relative (about 10 sqrt(n) u; a single accumulator that stagnates fails it).
  static lab::Tolerance tolerance() { return lab::Tolerance::fp32(); }

  struct Problem : lab::Problem {
    std::size_t n;
    lab::DeviceBuffer<float> x, mean;

    Problem(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), x(n), mean(1) {
      rng.uniform(x, 0.f, 1.f);  // positive: a mean near 0.5, no cancellation to hide errors in
    }
    void poison(cudaStream_t s) override { lab::poison(mean, s); }
    lab::Verdict verify() override {
      const auto h = x.download();
      lab::Sum sum;
      for (float v : h) sum.add(v);
      const double nd = static_cast<double>(n);
      const std::vector<double> ref{sum.value / nd}, slack{lab::fp32::sum_error(nd) * sum.magnitude / nd};
      return lab::compare(mean.download(), ref, tolerance(), "mean", {}, slack);
    }
  };
};
