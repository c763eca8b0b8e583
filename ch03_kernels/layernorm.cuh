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
// Both directions also exist on bf16 and fp16 storage (layernorm_bf16, layernorm_fp16: x, gamma,
// beta and y in 16 bits; layernorm_backward_bf16, layernorm_backward_fp16: x, gamma, dy, dx, dgamma
// and dbeta; mean and rstd fp32 and the arithmetic fp32 in all, as PyTorch's layer_norm on bf16 and
// fp16 tensors): the storage twins of the variant files that say so (lab-storage,
// common/lab/storage.hpp), half the bytes. Their check: the reference in double from the 16-bit
// inputs (exact in fp32), fp32's bound, and each output's one rounding on top (2^-8 of the value in
// bf16, 2^-11 in fp16 with 2^-25 absolutely below fp16's normal range: lab::StorageOf).
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
// 2^-8 for bf16, 2^-11 for fp16): the tolerance holds its share of the reference
// (StorageOf::rounded), y_slack its share of the fp32 errors, which that rounding may enlarge too,
// and floor, the rounding's absolute bound below the storage's normal range (fp16's 2^-25), so that
// the whole-output bound holds it too.
struct ForwardReference {
  RowStats stats;
  std::vector<double> y, y_slack, mean_slack, rstd_slack;
};
inline ForwardReference forward_reference(const std::vector<float>& hx, const std::vector<float>& hg,
                                          const std::vector<float>& hb, int rows, int dim, double rounding,
                                          double floor = 0) {
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
                           (1 + rounding) +
                       floor;
    }
  out.mean_slack = sl.mean;
  for (int r = 0; r < rows; ++r) out.rstd_slack[r] = sl.rstd_rel[r] * st.rstd[r];
  return out;
}

// The backward's reference from the inputs as the kernel sees them (fp32 values; bf16 ones widened,
// exactly) and the saved mean and rstd: dx, dgamma and dbeta in double, and the rounding a correct
// fp32 backward may make in each (the checks' slack). rounding and floor: as forward_reference's
// (the outputs' rounding to their storage), which may enlarge the fp32 errors by its own share.
// Slack: dx_j = rstd (g_j - s1 / D - xhat_j s2 / D) with s1 = sum g, s2 = sum g xhat, each a sum of
// D terms that went through up to 4 roundings (x - mean, * rstd, dy * gamma, * xhat); the bound is
// that sum's error on the magnitude of every part, plus six roundings of the combination. dgamma
// and dbeta are column sums over the rows.
struct BackwardReference {
  std::vector<double> dx, dx_slack, dgamma, dgamma_slack, dbeta, dbeta_slack;
};
inline BackwardReference backward_reference(const std::vector<float>& hx, const std::vector<float>& hg,
                                            const std::vector<float>& hdy, const std::vector<float>& hm,
                                            const std::vector<float>& hr, int rows, int dim, double rounding,
                                            double floor = 0) {
  constexpr double u = lab::fp32::kUnitRoundoff;
  const double e_row = lab::fp32::sum_error(dim + 4.0) + 6 * u;
  BackwardReference out{std::vector<double>(hx.size()), std::vector<double>(hx.size()), std::vector<double>(dim),
                        std::vector<double>(dim), std::vector<double>(dim), std::vector<double>(dim)};
  std::vector<double> xhat(dim);
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
      out.dx[base + j] = hr[r] * (g - s1.value / dim - xhat[j] * s2.value / dim);
      out.dx_slack[base + j] = e_row * hr[r] *
                               (std::fabs(g) + s1.magnitude / dim + std::fabs(xhat[j]) * s2.magnitude / dim) *
                               (1 + rounding) +
                           floor;
    }
  }
  for (int j = 0; j < dim; ++j) {
    out.dgamma[j] = sdg[j].value, out.dbeta[j] = sdb[j].value;
    out.dgamma_slack[j] = lab::fp32::sum_error(rows + 4.0) * sdg[j].magnitude * (1 + rounding) + floor;
    out.dbeta_slack[j] = lab::fp32::sum_error(rows + 1.0) * sdb[j].magnitude * (1 + rounding) + floor;
  }
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

// T: the storage of x, gamma, beta and y (float, bf16 or fp16); mean and rstd are fp32 in all.
template <class T>
struct LayerNormOf : LayerNormShapes {
  using S = lab::StorageOf<T>;
  static constexpr const char* name = S::pick("layernorm", "layernorm_bf16", "layernorm_fp16");
  // y's bound: fp32's, and in 16 bits y's one rounding on top (with ForwardReference's slack).
  static lab::Tolerance y_tolerance() { return S::fp32_rounded(); }
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
      const ln::ForwardReference ref = ln::forward_reference(hx, hg, hb, rows, dim, S::kRounding, S::kFloor);
      lab::Verdict v = lab::compare(S::to_float(y.download()), ref.y, y_tolerance(), "y", {rows, dim}, ref.y_slack);
      v.also(lab::compare(mean.download(), ref.stats.mean, lab::Tolerance::fp32(), "mean", {}, ref.mean_slack));
      return v.also(lab::compare(rstd.download(), ref.stats.rstd, lab::Tolerance::fp32(), "rstd", {}, ref.rstd_slack));
    }
  };
};

// The forward on the storage this file is compiled for (lab::Stored: a storage twin's bf16 or
// fp16), and on each storage by name.
using LayerNorm = LayerNormOf<lab::Stored>;
using LayerNormFp32 = LayerNormOf<float>;
using LayerNormBf16 = LayerNormOf<__nv_bfloat16>;
using LayerNormFp16 = LayerNormOf<__half>;

// T: the storage of x, gamma, dy, dx, dgamma and dbeta (float, bf16 or fp16); mean and rstd are
// fp32 in all (the forward's, as PyTorch saves them).
template <class T>
struct LayerNormBackwardOf : LayerNormShapes {
  using S = lab::StorageOf<T>;
  static constexpr const char* name =
      S::pick("layernorm_backward", "layernorm_backward_bf16", "layernorm_backward_fp16");
  // Each output's bound: fp32's, and in 16 bits its one rounding on top (with the slack below).
  static lab::Tolerance out_tolerance() { return S::fp32_rounded(); }
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
    const double n = double(s[0]), d = double(s[1]), b = sizeof(T);
    // x, dy, gamma, mean, rstd in; dx, dgamma, dbeta out
    return {.bytes = b * (3 * n * d + 3 * d) + 4.0 * 2 * n, .flops = 0, .written = b * (n * d + 2 * d)};
  }

  struct Problem : lab::Problem {
    int rows, dim;
    lab::DeviceBuffer<T> x, gamma, dy;
    lab::DeviceBuffer<float> mean, rstd;
    lab::DeviceBuffer<T> dx, dgamma, dbeta;
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
      const ln::RowStats st = ln::reference_stats(S::to_float(x.download()), rows, dim);
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
      const auto hx = S::to_float(x.download()), hg = S::to_float(gamma.download()), hdy = S::to_float(dy.download()),
                 hm = mean.download(), hr = rstd.download();
      const ln::BackwardReference ref =
          ln::backward_reference(hx, hg, hdy, hm, hr, rows, dim, S::kRounding, S::kFloor);
      lab::Verdict v =
          lab::compare(S::to_float(dx.download()), ref.dx, out_tolerance(), "dx", {rows, dim}, ref.dx_slack);
      v.also(lab::compare(S::to_float(dgamma.download()), ref.dgamma, out_tolerance(), "dgamma", {}, ref.dgamma_slack));
      return v.also(
          lab::compare(S::to_float(dbeta.download()), ref.dbeta, out_tolerance(), "dbeta", {}, ref.dbeta_slack));
    }
  };
};

// The backward on the storage this file is compiled for, and on each storage by name.
using LayerNormBackward = LayerNormBackwardOf<lab::Stored>;
using LayerNormBackwardFp32 = LayerNormBackwardOf<float>;
using LayerNormBackwardBf16 = LayerNormBackwardOf<__nv_bfloat16>;
using LayerNormBackwardFp16 = LayerNormBackwardOf<__half>;
