// The checks of LayerNorm on 16-bit storage (layernorm_bf16, layernorm_fp16 and their backwards),
// checked both ways on the CPU (no GPU), for each storage: a correct kernel (the one-pass kernels'
// fp32 arithmetic on the widened inputs, each output rounded to the nearest bf16 or fp16) passes the
// topic's bound and comes near it (the bound is the rounding's own, not a loose one); fp32's bound
// alone fails it (the rounding term is needed); a 1% error fails, in every second element of an
// output or in one.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "layernorm.cuh"
#include "storages.hpp"

namespace {

using storages::kNear;
using storages::round_to;

struct Rows {
  int rows, dim;
  std::vector<float> x, gamma, beta;  // values of the storage, as floats
};

// The topic's distributions (x in [-2, 4], gamma in [0.5, 1.5], beta in [-0.5, 0.5]), in T.
template <class T>
Rows make_rows(int rows, int dim, unsigned seed) {
  std::mt19937 gen(seed);
  auto draw = [&](float lo, float hi) { return round_to<T>(std::uniform_real_distribution<float>(lo, hi)(gen)); };
  Rows r{rows, dim, std::vector<float>(std::size_t(rows) * dim), std::vector<float>(dim), std::vector<float>(dim)};
  for (float& v : r.x) v = draw(-2.f, 4.f);
  for (float& v : r.gamma) v = draw(0.5f, 1.5f);
  for (float& v : r.beta) v = draw(-0.5f, 0.5f);
  return r;
}

// The one-pass kernel's arithmetic in fp32 (the sums in order: a correct order among many), y
// before its rounding to the storage.
std::vector<float> kernel_fp32(const Rows& in) {
  std::vector<float> y(in.x.size());
  for (int r = 0; r < in.rows; ++r) {
    const float* x = in.x.data() + std::size_t(r) * in.dim;
    float sum = 0.f, sq = 0.f;
    for (int j = 0; j < in.dim; ++j) sum += x[j];
    const float mu = sum / in.dim;
    for (int j = 0; j < in.dim; ++j) sq += (x[j] - mu) * (x[j] - mu);
    const float rs = 1.f / std::sqrt(sq / in.dim + ln::kEps);
    for (int j = 0; j < in.dim; ++j)
      y[std::size_t(r) * in.dim + j] = (x[j] - mu) * rs * in.gamma[j] + in.beta[j];
  }
  return y;
}

// v rounded to T, element i scaled by scale(i) first (a planted error).
template <class T, class F>
std::vector<float> stored(const std::vector<float>& v, F scale) {
  std::vector<float> y(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) y[i] = round_to<T>(scale(i) * v[i]);
  return y;
}
template <class T>
std::vector<float> stored(const std::vector<float>& v) {
  return stored<T>(v, [](std::size_t) { return 1.f; });
}

template <class T>
lab::Verdict check(const Rows& in, const std::vector<float>& y, lab::Tolerance tol) {
  using S = lab::StorageOf<T>;
  const ln::ForwardReference ref =
      ln::forward_reference(in.x, in.gamma, in.beta, in.rows, in.dim, S::kRounding, S::kFloor);
  return lab::compare(y, ref.y, tol, "y", {in.rows, in.dim}, ref.y_slack);
}

template <class T>
class LayerNorm16BitCheck : public ::testing::Test {};
TYPED_TEST_SUITE(LayerNorm16BitCheck, storages::Both, storages::Name);

TYPED_TEST(LayerNorm16BitCheck, CorrectRoundingPassesAndComesNearTheBound) {
  using T = TypeParam;
  using Topic = LayerNormOf<T>;
  for (const auto& [rows, dim] : {std::pair{64, 768}, std::pair{3, 4097}, std::pair{300, 128}}) {
    const Rows in = make_rows<T>(rows, dim, unsigned(rows * 7919 + dim));
    const std::vector<float> y = stored<T>(kernel_fp32(in));
    const lab::Verdict v = check<T>(in, y, Topic::y_tolerance());
    EXPECT_TRUE(v.pass) << rows << "x" << dim << ": " << v.details();
    EXPECT_GT(v.worst_share, kNear<T>) << rows << "x" << dim << ": " << v.summary();
    // fp32's bound alone (the fp32 topic's) fails the same values: the rounding is the bound.
    EXPECT_FALSE(check<T>(in, y, LayerNormFp32::y_tolerance()).pass) << rows << "x" << dim;
  }
}

TYPED_TEST(LayerNorm16BitCheck, OnePercentFails) {
  // 1% off before the rounding (as tools/planted_bugs.sh plants it): the rounding takes back at
  // most 2^-8 of the value (bf16; fp16 2^-11), and 1% - 2^-8 is above the bound (2^-8 + 1e-5 of it,
  // and the fp32 slack, far smaller) wherever |y| is not tiny (the absolute term, 1e-5, holds those).
  using T = TypeParam;
  using Topic = LayerNormOf<T>;
  const Rows in = make_rows<T>(64, 768, 11);
  const std::vector<float> v = kernel_fp32(in);
  EXPECT_FALSE(
      check<T>(in, stored<T>(v, [](std::size_t i) { return i % 2 ? 1.01f : 1.f; }), Topic::y_tolerance()).pass);
  // One element 1% off, here and there.
  int tried = 0;
  for (std::size_t k = 0; k < v.size(); k += 997) {
    if (std::fabs(v[k]) < 1e-2f) continue;
    const auto one = stored<T>(v, [k](std::size_t i) { return i == k ? 1.01f : 1.f; });
    EXPECT_FALSE(check<T>(in, one, Topic::y_tolerance()).pass) << "element " << k << ", y " << v[k];
    ++tried;
  }
  EXPECT_GT(tried, 30);
}

// ---- the backward ----

struct Grads {
  std::vector<float> dx, dgamma, dbeta;
};

// The saved statistics as the topic makes them: in double, rounded to float once.
struct Stats {
  std::vector<float> mean, rstd;
};
Stats saved_stats(const Rows& in) {
  const ln::RowStats st = ln::reference_stats(in.x, in.rows, in.dim);
  return {std::vector<float>(st.mean.begin(), st.mean.end()), std::vector<float>(st.rstd.begin(), st.rstd.end())};
}

// The one-pass backward's arithmetic in fp32 (the row sums and the column sums in row order: a
// correct order among many), before the outputs' rounding to the storage.
Grads backward_fp32(const Rows& in, const std::vector<float>& dy, const Stats& st) {
  const int d = in.dim;
  Grads out{std::vector<float>(in.x.size()), std::vector<float>(d), std::vector<float>(d)};
  std::vector<float> xhat(d), g(d);
  for (int r = 0; r < in.rows; ++r) {
    const std::size_t base = std::size_t(r) * d;
    float s1 = 0.f, s2 = 0.f;
    for (int j = 0; j < d; ++j) {
      xhat[j] = (in.x[base + j] - st.mean[r]) * st.rstd[r];
      out.dgamma[j] += dy[base + j] * xhat[j];
      out.dbeta[j] += dy[base + j];
      g[j] = dy[base + j] * in.gamma[j];
      s1 += g[j], s2 += g[j] * xhat[j];
    }
    const float mean_g = s1 / d, mean_gx = s2 / d;
    for (int j = 0; j < d; ++j) out.dx[base + j] = st.rstd[r] * (g[j] - mean_g - xhat[j] * mean_gx);
  }
  return out;
}

template <class T>
std::vector<float> values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  for (float& e : v) e = round_to<T>(std::uniform_real_distribution<float>(-1.f, 1.f)(gen));
  return v;
}

// The backward's three checks as the topic runs them, under tolerance tol.
template <class T>
lab::Verdict check_backward(const Rows& in, const std::vector<float>& dy, const Stats& st, const Grads& got,
                            lab::Tolerance tol) {
  using S = lab::StorageOf<T>;
  const ln::BackwardReference ref =
      ln::backward_reference(in.x, in.gamma, dy, st.mean, st.rstd, in.rows, in.dim, S::kRounding, S::kFloor);
  lab::Verdict v = lab::compare(got.dx, ref.dx, tol, "dx", {in.rows, in.dim}, ref.dx_slack);
  v.also(lab::compare(got.dgamma, ref.dgamma, tol, "dgamma", {}, ref.dgamma_slack));
  return v.also(lab::compare(got.dbeta, ref.dbeta, tol, "dbeta", {}, ref.dbeta_slack));
}

template <class T>
Grads stored(const Grads& g) {
  return {stored<T>(g.dx), stored<T>(g.dgamma), stored<T>(g.dbeta)};
}

template <class T>
class LayerNormBackward16BitCheck : public ::testing::Test {};
TYPED_TEST_SUITE(LayerNormBackward16BitCheck, storages::Both, storages::Name);

TYPED_TEST(LayerNormBackward16BitCheck, CorrectRoundingPassesAndComesNearTheBound) {
  using T = TypeParam;
  for (const auto& [rows, dim] : {std::pair{64, 768}, std::pair{3, 4097}, std::pair{300, 128}}) {
    const Rows in = make_rows<T>(rows, dim, unsigned(rows * 104729 + dim));
    const std::vector<float> dy = values<T>(in.x.size(), unsigned(rows + dim));
    const Stats st = saved_stats(in);
    const Grads g = stored<T>(backward_fp32(in, dy, st));
    const lab::Verdict v = check_backward<T>(in, dy, st, g, LayerNormBackwardOf<T>::out_tolerance());
    EXPECT_TRUE(v.pass) << rows << "x" << dim << ": " << v.details();
    EXPECT_GT(v.worst_share, kNear<T>) << rows << "x" << dim << ": " << v.summary();
    // fp32's bound alone (the fp32 topic's) fails the same values: the rounding is the bound.
    EXPECT_FALSE(check_backward<T>(in, dy, st, g, LayerNormBackwardFp32::out_tolerance()).pass)
        << rows << "x" << dim;
  }
}

TYPED_TEST(LayerNormBackward16BitCheck, OnePercentFails) {
  using T = TypeParam;
  const Rows in = make_rows<T>(64, 768, 13);
  const std::vector<float> dy = values<T>(in.x.size(), 14);
  const Stats st = saved_stats(in);
  const Grads exact = backward_fp32(in, dy, st);
  const auto tol = LayerNormBackwardOf<T>::out_tolerance();
  const auto odd = [](std::size_t i) { return i % 2 ? 1.01f : 1.f; };
  const Grads right = stored<T>(exact);
  // Every second element of one output 1% off (before the rounding, as a kernel's would be), the
  // other two right.
  EXPECT_FALSE(check_backward<T>(in, dy, st, {stored<T>(exact.dx, odd), right.dgamma, right.dbeta}, tol).pass);
  EXPECT_FALSE(check_backward<T>(in, dy, st, {right.dx, stored<T>(exact.dgamma, odd), right.dbeta}, tol).pass);
  EXPECT_FALSE(check_backward<T>(in, dy, st, {right.dx, right.dgamma, stored<T>(exact.dbeta, odd)}, tol).pass);
  // One element of dx 1% off, here and there, where dx is not small against its own slack: 1% less
  // the two roundings' 2^-7 (bf16's; fp16's 2^-10) is 0.22% of it, above the fp32 slack of a
  // difference of sums of 768 terms (a few 1e-4 at most here) once |dx| > 0.2.
  int tried = 0;
  for (std::size_t k = 0; k < exact.dx.size(); k += 331) {
    if (std::fabs(exact.dx[k]) < 0.2f) continue;
    const auto one = [k](std::size_t i) { return i == k ? 1.01f : 1.f; };
    EXPECT_FALSE(check_backward<T>(in, dy, st, {stored<T>(exact.dx, one), right.dgamma, right.dbeta}, tol).pass)
        << "element " << k << ", dx " << exact.dx[k];
    ++tried;
  }
  EXPECT_GT(tried, 30);
}

}  // namespace
