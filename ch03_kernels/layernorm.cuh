// LayerNorm over the last dimension of x (N rows of D), with a learned scale gamma and shift beta:
//   mean_r = sum_j x_rj / D    var_r = sum_j (x_rj - mean_r)^2 / D    rstd_r = 1 / sqrt(var_r + eps)
//   y_rj = (x_rj - mean_r) rstd_r gamma_j + beta_j
// The forward also writes mean and rstd (N each), which the backward reuses, as PyTorch does.
// Backward, given dy, with xhat = (x - mean) rstd and g = dy gamma:
//   dx_rj = rstd_r (g_rj - mean_j(g_r) - xhat_rj mean_j(g_r xhat_r))
//   dgamma_j = sum_r dy_rj xhat_rj     dbeta_j = sum_r dy_rj
// A handful of operations an element against 8 bytes moved forward (12 backward): memory-bound at
// every D, so the yardstick is the copy bandwidth. What decides the speed is how many times each
// row crosses memory: the baselines' kernels read x three times; the optimized ones once.
// The forward also exists on bf16 storage (layernorm_bf16: x, gamma, beta and y bf16, mean and
// rstd fp32, the arithmetic fp32, as PyTorch's layer_norm on bf16 tensors): the storage twins of
// the forward's variant files (lab-storage, common/lab/storage.hpp), half the bytes. Its check:
// the reference in double from the bf16 inputs (exact in fp32), fp32's bound, and y's one rounding
// to bf16 (2^-8 of the value) on top.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lab/lab.hpp"
#include "lab/storage.hpp"
#include "rows.cuh"

namespace ln {

inline constexpr float kEps = 1e-5f;

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

// The rounding a correct fp32 forward may make in each row's statistics (the slack of the checks).
//   mean: a sum of D terms and a division: sum_error(D + 1) sum |x| / D.
//   rstd: var is a sum of D positive terms; the bound takes their magnitude as E[x^2] + mean^2, so
//   that a one-pass E[x^2] - mean^2 (a correct formula, worse conditioned) passes too, as does the
//   two-pass or Welford form. Then + eps, and 1/sqrt halves var's relative error; six roundings
//   cover the addition, the square root, the division (or rsqrtf's 2 ulp).
struct ForwardSlack {
  std::vector<double> mean, rstd_rel;  // absolute for the mean, relative for rstd
};
inline ForwardSlack forward_slack(const std::vector<float>& x, const RowStats& st, int rows, int dim) {
  constexpr double u = lab::fp32::kUnitRoundoff;
  ForwardSlack s{std::vector<double>(rows), std::vector<double>(rows)};
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + std::size_t(r) * dim;
    double abs_sum = 0, sq_sum = 0;
    for (int j = 0; j < dim; ++j) abs_sum += std::fabs(row[j]), sq_sum += double(row[j]) * row[j];
    s.mean[r] = lab::fp32::sum_error(dim + 1.0) * abs_sum / dim;
    const double var_eps = 1.0 / (st.rstd[r] * st.rstd[r]);  // var + eps
    const double var_err = lab::fp32::sum_error(dim + 2.0) * (sq_sum / dim + st.mean[r] * st.mean[r]);
    s.rstd_rel[r] = 0.5 * var_err / var_eps + 6 * u;
  }
  return s;
}

// The forward's reference from the inputs as the kernel sees them (fp32 values; bf16 ones widened,
// exactly): y, mean and rstd in double, and the rounding a correct fp32 forward may make in each
// (the checks' slack). rounding: the relative error of y's rounding to its storage (0 for fp32,
// 2^-8 for bf16): the tolerance holds its share of the reference (StorageOf::rounded), y_slack its
// share of the fp32 errors, which that rounding may enlarge too.
struct ForwardReference {
  RowStats stats;
  std::vector<double> y, y_slack, mean_slack, rstd_slack;
};
inline ForwardReference forward_reference(const std::vector<float>& hx, const std::vector<float>& hg,
                                          const std::vector<float>& hb, int rows, int dim, double rounding) {
  ForwardReference out{reference_stats(hx, rows, dim), std::vector<double>(hx.size()), std::vector<double>(hx.size()),
                       {}, std::vector<double>(rows)};
  const RowStats& st = out.stats;
  const ForwardSlack sl = forward_slack(hx, st, rows, dim);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < dim; ++j) {
      const std::size_t i = std::size_t(r) * dim + j;
      const double c = hx[i] - st.mean[r], n = std::fabs(c) * st.rstd[r] * std::fabs(hg[j]);
      out.y[i] = c * st.rstd[r] * hg[j] + hb[j];
      // The mean's error moves every element of the row; rstd's scales it; then five roundings
      // (the subtraction, two products, the shift, and one for an FMA's order).
      out.y_slack[i] = (st.rstd[r] * std::fabs(hg[j]) * sl.mean[r] + n * sl.rstd_rel[r] +
                        5 * lab::fp32::kUnitRoundoff * (n + std::fabs(hb[j]))) *
                       (1 + rounding);
    }
  out.mean_slack = sl.mean;
  for (int r = 0; r < rows; ++r) out.rstd_slack[r] = sl.rstd_rel[r] * st.rstd[r];
  return out;
}

}  // namespace ln

// The shapes both directions share. Sweep: three the users' benchmarks name (a transformer's
// 768, and two wide rows); checks: D = 1, D not a multiple of 4 or 32, every register tile, and rows longer than
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

// T: the storage of x, gamma, beta and y (float or bf16); mean and rstd are fp32 either way.
template <class T>
struct LayerNormOf : LayerNormShapes {
  using S = lab::StorageOf<T>;
  static constexpr const char* name = S::bf16 ? "layernorm_bf16" : "layernorm";
  // y's bound: fp32's, and in bf16 y's one rounding on top (with ForwardReference's slack).
  static lab::Tolerance y_tolerance() { return S::rounded(lab::Tolerance::fp32(), "fp32 arithmetic, bf16 output"); }
  static lab::Work work(const lab::Shape& s) {
    const double n = double(s[0]), d = double(s[1]), b = sizeof(T);
    // x, gamma, beta in; y, mean, rstd out
    return {.bytes = b * (2 * n * d + 2 * d) + 4.0 * 2 * n, .flops = 0, .written = b * n * d + 4.0 * 2 * n};
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<T> x, gamma, beta, y;
    lab::DeviceBuffer<float> mean, rstd;
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
    Problem(const lab::Shape& s, lab::Borrowed) : rows(static_cast<int>(s[0])), dim(static_cast<int>(s[1])) {}
    void poison(cudaStream_t s) override {
      lab::poison(y, s);
      lab::poison(mean, s);
      lab::poison(rstd, s);
    }
    lab::Verdict verify() override {
      const auto hx = S::to_float(x.download()), hg = S::to_float(gamma.download()), hb = S::to_float(beta.download());
      const ln::ForwardReference ref = ln::forward_reference(hx, hg, hb, rows, dim, S::kRounding);
      lab::Verdict v = lab::compare(S::to_float(y.download()), ref.y, y_tolerance(), "y", {rows, dim}, ref.y_slack);
      v.also(lab::compare(mean.download(), ref.stats.mean, lab::Tolerance::fp32(), "mean", {}, ref.mean_slack));
      return v.also(lab::compare(rstd.download(), ref.stats.rstd, lab::Tolerance::fp32(), "rstd", {}, ref.rstd_slack));
    }
  };
};

// The forward on the storage this file is compiled for (lab::Stored: a storage twin's bf16), and
// on each storage by name.
using LayerNorm = LayerNormOf<lab::Stored>;
using LayerNormFp32 = LayerNormOf<float>;
using LayerNormBf16 = LayerNormOf<__nv_bfloat16>;

struct LayerNormBackward : LayerNormShapes {
  static constexpr const char* name = "layernorm_backward";
  // The forward's awkward shapes, and D = 1 to 3 once more: a row of one or two normalizes to
  // constants (0, or -1 and 1), so dx is zero up to rounding (dgamma exactly zero for D = 1): the
  // identically zero outputs are checked element by element, the near-zero ones by their slack.
  // And many rows: 20000 x 64 gives each persistent block of the TMA pipeline more stages of rows
  // than it has buffers, so its buffers wrap around and its barriers change phase; 1000 x 4000 does
  // the same for its wide rows, which a block takes two at a time (an odd count left at the end),
  // and 600 x 12292 for rows split between two SMs: their halves unequal (1537 and 1536 float4s),
  // each half's ring and the halves' exchange wrapping.
  static std::vector<lab::Shape> checks() {
    auto all = LayerNormShapes::checks();
    for (lab::Shape s : {lab::Shape{5, 1}, lab::Shape{4, 2}, lab::Shape{4, 3}, lab::Shape{20000, 64}, lab::Shape{1000, 4000},
                         lab::Shape{600, 12292}})
      all.push_back(s);
    return all;
  }
  static lab::Work work(const lab::Shape& s) {
    const double n = double(s[0]), d = double(s[1]);
    // x, dy, gamma, mean, rstd in; dx, dgamma, dbeta out
    return {.bytes = 4.0 * (3 * n * d + 3 * d + 2 * n), .flops = 0, .written = 4.0 * (n * d + 2 * d)};
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<float> x, gamma, dy, mean, rstd, dx, dgamma, dbeta;
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
          dbeta(dim) {
      rng.uniform(x, -2.f, 4.f);
      rng.uniform(gamma, 0.5f, 1.5f);
      rng.uniform(dy, -1.f, 1.f);
      // The forward's saved statistics, computed here in double and rounded to float once.
      const ln::RowStats st = ln::reference_stats(x.download(), rows, dim);
      const std::vector<float> hm(st.mean.begin(), st.mean.end()), hr(st.rstd.begin(), st.rstd.end());
      mean.upload(hm);
      rstd.upload(hr);
    }
    Problem(const lab::Shape& s, lab::Borrowed) : rows(static_cast<int>(s[0])), dim(static_cast<int>(s[1])) {}
    void poison(cudaStream_t s) override {
      lab::poison(dx, s);
      lab::poison(dgamma, s);
      lab::poison(dbeta, s);
    }
    lab::Verdict verify() override {
      const auto hx = x.download(), hg = gamma.download(), hdy = dy.download(), hm = mean.download(),
                 hr = rstd.download();
      // Slack: dx_j = rstd (g_j - s1 / D - xhat_j s2 / D) with s1 = sum g, s2 = sum g xhat, each a
      // sum of D terms that went through up to 4 roundings (x - mean, * rstd, dy * gamma, * xhat);
      // the bound is that sum's error on the magnitude of every part, plus six roundings of the
      // combination. dgamma and dbeta are column sums over the rows.
      constexpr double u = lab::fp32::kUnitRoundoff;
      const double e_row = lab::fp32::sum_error(dim + 4.0) + 6 * u;
      std::vector<double> rdx(hx.size()), sdx(hx.size()), xhat(dim);
      std::vector<lab::Sum> sdg(dim), sdb(dim);
      for (int r = 0; r < rows; ++r) {
        const std::size_t base = std::size_t(r) * dim;
        lab::Sum s1, s2;
        for (int j = 0; j < dim; ++j) {
          xhat[j] = (double(hx[base + j]) - hm[r]) * hr[r];
          const double g = double(hdy[base + j]) * hg[j];
          s1.add(g), s2.add(g * xhat[j]);
          sdg[j].add(double(hdy[base + j]) * xhat[j]);
          sdb[j].add(hdy[base + j]);
        }
        for (int j = 0; j < dim; ++j) {
          const double g = double(hdy[base + j]) * hg[j];
          rdx[base + j] = hr[r] * (g - s1.value / dim - xhat[j] * s2.value / dim);
          sdx[base + j] = e_row * hr[r] * (std::fabs(g) + s1.magnitude / dim + std::fabs(xhat[j]) * s2.magnitude / dim);
        }
      }
      std::vector<double> rdg(dim), rdb(dim), slack_g(dim), slack_b(dim);
      for (int j = 0; j < dim; ++j) {
        rdg[j] = sdg[j].value, rdb[j] = sdb[j].value;
        slack_g[j] = lab::fp32::sum_error(rows + 4.0) * sdg[j].magnitude;
        slack_b[j] = lab::fp32::sum_error(rows + 1.0) * sdb[j].magnitude;
      }
      lab::Verdict v = lab::compare(dx.download(), rdx, lab::Tolerance::fp32(), "dx", {rows, dim}, sdx);
      v.also(lab::compare(dgamma.download(), rdg, lab::Tolerance::fp32(), "dgamma", {}, slack_g));
      return v.also(lab::compare(dbeta.download(), rdb, lab::Tolerance::fp32(), "dbeta", {}, slack_b));
    }
  };
};
