// The problem behind the weighted sum: y = x @ w for x of B rows by D columns (row-major) and a
// weight vector w of D: one dot product per row. Each element of x is read once and used for one
// multiply-add, so the whole operation is a stream through x (arithmetic intensity 0.5 FLOP/byte):
// memory-bound, and how the threads walk x decides everything. The yardstick is cuBLAS's gemv.
//
// Its backward, given dy (B): dx = dy w^T (B x D, an outer product: a write of B x D floats that
// reads only the two vectors) and dw = x^T dy (D: a sum over the rows, down each column of x).
// Minimal traffic: read x and write dx once each, so the yardstick is again the copy bandwidth,
// and cuBLAS (gemm with k = 1 for dx, gemv for dw) is the library to beat.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "lab/lab.hpp"
#include "rows.cuh"

// Shapes for both directions: the users' (64x128, 256x512, 1024x2048) and one that leaves the L2
// far behind; awkward ones: one row, one column, D not a multiple of 4 or of the warp, more rows
// than a grid row.
struct WeightedSumShapes {
  static constexpr int chapter = 3;
  static std::vector<std::string> dims() { return {"rows", "dim"}; }
  static std::vector<lab::Shape> sweep() { return {{64, 128}, {256, 512}, {1024, 2048}, {16384, 16384}}; }
  static std::vector<lab::Shape> checks() { return {{1, 1}, {3, 5}, {7, 33}, {33, 1000}, {5, 4097}, {70000, 3}}; }
  static std::string validate(const lab::Shape& s) {
    return double(s[0]) * double(s[1]) > double(std::int64_t{1} << 32) ? "at most 2^32 elements in x" : "";
  }
};

// y and dw are fp32 sums of products in an order each variant chooses: fp32's tolerance plus each
// sum's conditioning, sum_error(terms + 1) sum |x w| (the +1: the product's own rounding). dx is one
// product an element: fp32's tolerance alone.
inline lab::Tolerance weighted_sum_tolerance() { return lab::Tolerance::fp32(); }

struct WeightedSum : WeightedSumShapes {
  static constexpr const char* name = "weighted_sum";
  static lab::Work work(const lab::Shape& s) {
    const double b = double(s[0]), d = double(s[1]);
    return {.bytes = 4.0 * (b * d + d + b), .flops = 2.0 * b * d, .written = 4.0 * b};  // x, w in; y out
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<float> x, w, y;
    Problem(const lab::Shape& s, lab::Rng& rng)
        : rows(static_cast<int>(s[0])), dim(static_cast<int>(s[1])), x(std::size_t(rows) * dim), w(dim), y(rows) {
      rng.uniform(x, -1.f, 1.f);
      rng.uniform(w, -1.f, 1.f);
    }
    // The buffers left empty, to be pointed at a caller's memory (the PyTorch bridge).
    Problem(const lab::Shape& s, lab::Borrowed) : rows(static_cast<int>(s[0])), dim(static_cast<int>(s[1])) {}
    void poison(cudaStream_t s) override { lab::poison(y, s); }
    lab::Verdict verify() override {
      const auto hx = x.download(), hw = w.download();
      std::vector<double> ref(rows), slack(rows);
      for (int r = 0; r < rows; ++r) {
        lab::Sum acc;
        for (int j = 0; j < dim; ++j) acc.add(double(hx[std::size_t(r) * dim + j]) * double(hw[j]));
        ref[r] = acc.value;
        slack[r] = lab::fp32::sum_error(dim + 1.0) * acc.magnitude;
      }
      return lab::compare(y.download(), ref, weighted_sum_tolerance(), "y", {}, slack);
    }
  };
};

// How the optimized backward splits the work: each thread owns V consecutive columns (V = 4 when
// D is a multiple of 4) and walks down `rows_per_part` rows of them; blockIdx.y picks the part.
// Enough parts to give every SM 2048 threads, each writing one partial dw per column; a second
// kernel adds the parts (rows::sum_partials). The partials are the variant's own scratch.
struct WeightedSumBackwardPlan {
  int vec, threads, parts, rows_per_part;
  unsigned col_blocks;
  WeightedSumBackwardPlan(int rows, int dim, int sms) {
    vec = dim % 4 == 0 ? 4 : 1;
    const int col_threads = dim / vec;
    threads = std::min(256, (col_threads + 31) / 32 * 32);
    col_blocks = static_cast<unsigned>((col_threads + threads - 1) / threads);
    const long long wanted = (2048LL * sms + std::int64_t(col_blocks) * threads - 1) / (std::int64_t(col_blocks) * threads);
    parts = static_cast<int>(std::clamp<long long>(wanted, 1, std::min(rows, 65535)));
    rows_per_part = (rows + parts - 1) / parts;
    parts = (rows + rows_per_part - 1) / rows_per_part;
  }
};

struct WeightedSumBackward : WeightedSumShapes {
  static constexpr const char* name = "weighted_sum_backward";
  static lab::Work work(const lab::Shape& s) {
    const double b = double(s[0]), d = double(s[1]);
    // read x, w, dy; write dx, dw. dx: one multiply an element; dw: one multiply-add.
    return {.bytes = 4.0 * (2 * b * d + 2 * d + b), .flops = 3.0 * b * d, .written = 4.0 * (b * d + d)};
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<float> x, w, dy, dx, dw;
    Problem(const lab::Shape& s, lab::Rng& rng)
        : rows(static_cast<int>(s[0])),
          dim(static_cast<int>(s[1])),
          x(std::size_t(rows) * dim),
          w(dim),
          dy(rows),
          dx(std::size_t(rows) * dim),
          dw(dim) {
      rng.uniform(x, -1.f, 1.f);
      rng.uniform(w, -1.f, 1.f);
      rng.uniform(dy, -1.f, 1.f);
    }
    // The buffers left empty, to be pointed at a caller's memory (the PyTorch bridge).
    Problem(const lab::Shape& s, lab::Borrowed) : rows(static_cast<int>(s[0])), dim(static_cast<int>(s[1])) {}
    void poison(cudaStream_t s) override {
      lab::poison(dx, s);
      lab::poison(dw, s);
    }
    lab::Verdict verify() override {
      const auto hx = x.download(), hw = w.download(), hdy = dy.download();
      std::vector<double> rdx(std::size_t(rows) * dim);
      std::vector<lab::Sum> sdw(dim);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < dim; ++j) {
          const std::size_t i = std::size_t(r) * dim + j;
          rdx[i] = double(hdy[r]) * double(hw[j]);
          sdw[j].add(double(hx[i]) * double(hdy[r]));
        }
      std::vector<double> rdw(dim), slack(dim);
      for (int j = 0; j < dim; ++j) {
        rdw[j] = sdw[j].value;
        slack[j] = lab::fp32::sum_error(rows + 1.0) * sdw[j].magnitude;
      }
      lab::Verdict v = lab::compare(dx.download(), rdx, weighted_sum_tolerance(), "dx", {rows, dim});
      return v.also(lab::compare(dw.download(), rdw, weighted_sum_tolerance(), "dw", {}, slack));
    }
  };
};
