// The problem behind the weighted sum: y = x @ w for x of B rows by D columns (row-major) and a
// weight vector w of D: one dot product per row. Each element of x is read once and used for one
// multiply-add, so the whole operation is a stream through x (arithmetic intensity 0.5 FLOP/byte):
// memory-bound, and how the threads walk x decides everything. The yardstick is cuBLAS's gemv.
#pragma once

#include <string>
#include <vector>

#include "lab/lab.hpp"

struct WeightedSum {
  static constexpr const char* name = "weighted_sum";
  static constexpr int chapter = 3;
  static std::vector<std::string> dims() { return {"rows", "dim"}; }
  // The users' shapes (64x128, 256x512, 1024x2048) and one that leaves the L2 far behind.
  static std::vector<lab::Shape> sweep() { return {{64, 128}, {256, 512}, {1024, 2048}, {16384, 16384}}; }
  // Awkward: one row, one column, D not a multiple of 4 or of the warp, more rows than a grid row.
  static std::vector<lab::Shape> checks() { return {{1, 1}, {3, 5}, {7, 33}, {33, 1000}, {5, 4097}, {70000, 3}}; }
  static lab::Work work(const lab::Shape& s) {
    const double b = double(s[0]), d = double(s[1]);
    return {.bytes = 4.0 * (b * d + d + b), .flops = 2.0 * b * d};
  }
  static std::string validate(const lab::Shape& s) {
    return double(s[0]) * double(s[1]) > double(std::int64_t{1} << 32) ? "at most 2^32 elements in x" : "";
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<float> x, w, y;
    lab::CublasHandle handle;  // for the library variant
    Problem(const lab::Shape& s, lab::Rng& rng)
        : rows(static_cast<int>(s[0])), dim(static_cast<int>(s[1])), x(std::size_t(rows) * dim), w(dim), y(rows) {
      rng.uniform(x, -1.f, 1.f);
      rng.uniform(w, -1.f, 1.f);
    }
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = x.download(), hw = w.download();
      std::vector<double> ref(rows);
      for (int r = 0; r < rows; ++r) {
        double acc = 0;
        for (int j = 0; j < dim; ++j) acc += double(hx[std::size_t(r) * dim + j]) * double(hw[j]);
        ref[r] = acc;
      }
      // Relative 1e-4, as the users' guide asks: fp32 sums of up to 16384 products, in any order.
      return lab::compare(y.download(), ref, lab::Tolerance{1e-4, 1e-4, 1e-4, "relative 1e-4"}, "y");
    }
  };
};
