// LayerNorm over the last dimension of x (N rows of D), with a learned scale gamma and shift beta:
//   mean_r = sum_j x_rj / D    var_r = sum_j (x_rj - mean_r)^2 / D    rstd_r = 1 / sqrt(var_r + eps)
//   y_rj = (x_rj - mean_r) rstd_r gamma_j + beta_j
// The forward also writes mean and rstd (N each), which the backward reuses, as PyTorch does.
// Backward, given dy, with xhat = (x - mean) rstd and g = dy gamma:
//   dx_rj = rstd_r (g_rj - mean_j(g_r) - xhat_rj mean_j(g_r xhat_r))
//   dgamma_j = sum_r dy_rj xhat_rj     dbeta_j = sum_r dy_rj
// A handful of operations an element against 8 bytes moved forward (12 backward): memory-bound at
// every D, so the yardstick is the copy bandwidth. What decides the speed is how many times each
// row crosses memory: the unfused kernels below read x three times; the optimized ones once.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lab/lab.hpp"
#include "rows.cuh"

namespace ln {

inline constexpr float kEps = 1e-5f;

// The unfused kernels (support_layernorm.cu), one statistic each: the baseline, and the optimized
// variants' fallback for rows longer than their register tiles hold.
namespace unfused {
// Row means, row rstd around them, then y element by element: x read three times.
void forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd, int rows,
             int dim, cudaStream_t s);
// The two row sums of g = dy gamma, dx element by element, then dgamma and dbeta with a thread per
// column. scratch: 2 * rows floats.
void backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy, float* dx,
              float* dgamma, float* dbeta, float* scratch, int rows, int dim, cudaStream_t s);
}  // namespace unfused

// How many blocks (and so partial dgamma/dbeta rows) the optimized backward uses: persistent
// blocks, as many an SM as fit (registers, shared memory) up to kMaxBlocksPerSm, never more than
// there are row groups. The cap bounds the partials' traffic: parts x 2D floats written and read
// again, a few percent of the 3ND the kernel must move.
inline constexpr int kMaxBlocksPerSm = 4;
inline int backward_parts(int rows, int rows_per_block, int sms, int blocks_per_sm) {
  const int groups = (rows + rows_per_block - 1) / rows_per_block;
  return std::max(1, std::min(groups, sms * std::clamp(blocks_per_sm, 1, kMaxBlocksPerSm)));
}

// Each row's mean and 1 / sqrt(var + eps) in double, two-pass: the forward's reference and the
// backward's saved statistics.
struct RowStats {
  std::vector<double> mean, rstd;
};
inline RowStats reference_stats(const std::vector<float>& x, int rows, int dim) {
  RowStats st{std::vector<double>(rows), std::vector<double>(rows)};
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + std::size_t(r) * dim;
    double m = 0, v = 0;
    for (int j = 0; j < dim; ++j) m += row[j];
    m /= dim;
    for (int j = 0; j < dim; ++j) v += (row[j] - m) * (row[j] - m);
    st.mean[r] = m;
    st.rstd[r] = 1.0 / std::sqrt(v / dim + double(kEps));
  }
  return st;
}

}  // namespace ln

// The shapes both directions share. Sweep: the issue's three (a transformer's 768, and two wide
// rows); checks: D = 1, D not a multiple of 4 or 32, every register tile, and rows longer than
// the largest tile (the fallback).
struct LayerNormShapes {
  static constexpr int chapter = 3;
  static std::vector<std::string> dims() { return {"rows", "dim"}; }
  static std::vector<lab::Shape> sweep() { return {{16384, 768}, {8192, 4096}, {4096, 16384}}; }
  static std::vector<lab::Shape> checks() {
    return {{1, 1},    {3, 5},     {7, 33},    {300, 128},  {64, 768},  {33, 1000}, {5, 1024},
            {4, 2048}, {3, 4096},  {2, 4097},  {2, 8192},   {2, 9001},  {2, 16384}, {2, 32768},
            {1, 40000}};
  }
  static std::string validate(const lab::Shape& s) {
    if (s[0] > (std::int64_t{1} << 31) - 1 || s[1] > (std::int64_t{1} << 31) - 1) return "rows and dim below 2^31";
    return double(s[0]) * double(s[1]) > double(std::int64_t{1} << 32) ? "at most 2^32 elements in x" : "";
  }
};

// Column sums of fp32 products over the rows (dgamma, dbeta): relative 1e-4, as for the weighted
// sum's dw; the per-row outputs keep fp32's 1e-5.
inline lab::Tolerance layernorm_column_sum_tolerance() { return {1e-4, 1e-4, 1e-5, "fp32 column sums"}; }

struct LayerNorm : LayerNormShapes {
  static constexpr const char* name = "layernorm";
  static lab::Work work(const lab::Shape& s) {
    const double n = double(s[0]), d = double(s[1]);
    return {.bytes = 4.0 * (2 * n * d + 2 * d + 2 * n), .flops = 0};  // x, gamma, beta in; y, mean, rstd out
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<float> x, gamma, beta, y, mean, rstd;
    Problem(const lab::Shape& s, lab::Rng& rng)
        : rows(static_cast<int>(s[0])),
          dim(static_cast<int>(s[1])),
          x(std::size_t(rows) * dim),
          gamma(dim),
          beta(dim),
          y(std::size_t(rows) * dim),
          mean(rows),
          rstd(rows) {
      rng.uniform(x, -2.f, 4.f);  // a mean away from zero: E[x^2] - E[x]^2 would lose digits here
      rng.uniform(gamma, 0.5f, 1.5f);
      rng.uniform(beta, -0.5f, 0.5f);
    }
    void poison(cudaStream_t s) override {
      lab::poison(y, s);
      lab::poison(mean, s);
      lab::poison(rstd, s);
    }
    lab::Verdict verify() override {
      const auto hx = x.download(), hg = gamma.download(), hb = beta.download();
      const ln::RowStats st = ln::reference_stats(hx, rows, dim);
      std::vector<double> ry(hx.size());
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < dim; ++j) {
          const std::size_t i = std::size_t(r) * dim + j;
          ry[i] = (hx[i] - st.mean[r]) * st.rstd[r] * hg[j] + hb[j];
        }
      lab::Verdict v = lab::compare(y.download(), ry, lab::Tolerance::fp32(), "y", {rows, dim});
      v.also(lab::compare(mean.download(), st.mean, lab::Tolerance::fp32(), "mean"));
      return v.also(lab::compare(rstd.download(), st.rstd, lab::Tolerance::fp32(), "rstd"));
    }
  };
};

struct LayerNormBackward : LayerNormShapes {
  static constexpr const char* name = "layernorm_backward";
  // The forward's awkward shapes but D = 1 and 2: a row of one or two normalizes to constants
  // (0, or -1 and 1), so dx is zero (dgamma too for D = 1) whatever a kernel computes, which no
  // check can tell from an unwritten output. The forward covers them.
  static std::vector<lab::Shape> checks() {
    auto all = LayerNormShapes::checks();
    std::erase_if(all, [](const lab::Shape& s) { return s[1] <= 2; });
    all.push_back({4, 3});
    return all;
  }
  static lab::Work work(const lab::Shape& s) {
    const double n = double(s[0]), d = double(s[1]);
    // x, dy, gamma, mean, rstd in; dx, dgamma, dbeta out
    return {.bytes = 4.0 * (3 * n * d + 3 * d + 2 * n), .flops = 0};
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<float> x, gamma, dy, mean, rstd, dx, dgamma, dbeta;
    lab::DeviceBuffer<float> scratch;  // the unfused kernels' row sums (2 x rows) and the fused
                                       // kernel's partial dgamma/dbeta (parts x 2 x dim)
    Problem(const lab::Shape& s, lab::Rng& rng)
        : rows(static_cast<int>(s[0])),
          dim(static_cast<int>(s[1])),
          x(std::size_t(rows) * dim),
          gamma(dim),
          dy(std::size_t(rows) * dim),
          mean(rows),
          rstd(rows),
          dx(std::size_t(rows) * dim),
          dgamma(dim),
          dbeta(dim),
          scratch(std::max<std::size_t>(2 * std::size_t(rows),
                                        2 * std::size_t(dim) *
                                            ln::backward_parts(rows, 1, rows::sm_count(), ln::kMaxBlocksPerSm))) {
      rng.uniform(x, -2.f, 4.f);
      rng.uniform(gamma, 0.5f, 1.5f);
      rng.uniform(dy, -1.f, 1.f);
      // The forward's saved statistics, computed here in double and rounded to float once.
      const ln::RowStats st = ln::reference_stats(x.download(), rows, dim);
      const std::vector<float> hm(st.mean.begin(), st.mean.end()), hr(st.rstd.begin(), st.rstd.end());
      mean.upload(hm);
      rstd.upload(hr);
    }
    void poison(cudaStream_t s) override {
      lab::poison(dx, s);
      lab::poison(dgamma, s);
      lab::poison(dbeta, s);
    }
    lab::Verdict verify() override {
      const auto hx = x.download(), hg = gamma.download(), hdy = dy.download(), hm = mean.download(),
                 hr = rstd.download();
      std::vector<double> rdx(hx.size()), rdg(dim, 0.0), rdb(dim, 0.0), xhat(dim);
      for (int r = 0; r < rows; ++r) {
        const std::size_t base = std::size_t(r) * dim;
        double s1 = 0, s2 = 0;
        for (int j = 0; j < dim; ++j) {
          xhat[j] = (double(hx[base + j]) - hm[r]) * hr[r];
          const double g = double(hdy[base + j]) * hg[j];
          s1 += g, s2 += g * xhat[j];
          rdg[j] += double(hdy[base + j]) * xhat[j];
          rdb[j] += hdy[base + j];
        }
        for (int j = 0; j < dim; ++j)
          rdx[base + j] = hr[r] * (double(hdy[base + j]) * hg[j] - s1 / dim - xhat[j] * s2 / dim);
      }
      lab::Verdict v = lab::compare(dx.download(), rdx, lab::Tolerance::fp32(), "dx", {rows, dim});
      v.also(lab::compare(dgamma.download(), rdg, layernorm_column_sum_tolerance(), "dgamma"));
      return v.also(lab::compare(dbeta.download(), rdb, layernorm_column_sum_tolerance(), "dbeta"));
    }
  };
};
