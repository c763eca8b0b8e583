// The fused GPT-2 steps' shared row kernels (gpt2/fused/kernels.cuh), each on its own, against a
// double reference of its own contract on the same inputs, in bf16 as steps 7 to 9 run them.
//
// Why here as well as in the steps' checks: a step's check compares the whole step with the double
// reference, so its bound must allow every bf16 rounding of the step before a kernel's output. For
// a bias gradient (a column sum whose terms cancel) that is more than 1% of the value, and three
// bugs of 1% in these kernels passed the step's check (tools/planted_bugs.sh: gpt2_grads_ln_bias,
// gpt2_grads_gelu_bias, gpt2_grads_qkv_rows). Here a kernel's inputs are exact (bf16 or fp32
// values the reference reads too), so its bound is its own arithmetic alone:
//  - an output written in bf16 errs by at most u_b = 2^-8 relative (rounded to nearest) plus the
//    fp32 error of the value rounded, (1 + u_b) times it: a 1% error is 2.5 bounds away;
//  - every output the kernel writes whole starts as NaN (lab::poison), so an unwritten one fails;
//  - an fp32 value by its operations' roundings (u = 2^-24 each; erff, expf, logf within CUDA's
//    documented 2, 2 and 1 ulp), stated at each test, with fp32::sum_error for sums;
//  - a copy or a rounding of an fp32 value to bf16: exactly the host's rounding of the same value.
// The inputs are drawn so that the column sums do not cancel (positive terms) as well as signed,
// so that the bound, which grows with the sum of the terms' magnitudes, stays near the value.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "gpt2/fused/kernels.cuh"
#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "lab/verify.hpp"
#include "tests/kernels/gelu_reference.cuh"
#include "tests/kernels/kernel_testing.cuh"

#pragma nv_diag_suppress 177  // kernels.cuh's helpers this file does not call

namespace {


// ---------------------------------------------------------------------------------------------
// layer_norm_backward_kernel<Items, V, bf16, Dy>, launched as FusedStep::layer_norm_backward does
// (min(rows, 512) blocks; here also one block, so that one block walks every row), dy in fp32 or
// (dy_in_bf16: as the products of step 20 write it) in bf16, then drawn as bf16 values:
//   xh = (x - mean) rstd, g = dy w, dx = rstd (g - mean(g) - xh mean(g xh)),
//   dres = dres_in + dx (accumulate), next_dy = dres in bf16, and the column sums
//   dw += sum dy xh, db += sum dy, next_db += sum dres (fp32 values).
// fp32 errors: xh 2 roundings, g 1; mean(g) a sum of d terms of 1 rounding each, then 1 / d and a
// product (2u); mean(g xh) of d terms of 4 roundings, then 2u; dx's own three operations. With
// A = |g| + sum|g| / d + |xh| sum|g xh| / d, they add up to at most
// rstd (8u A + sum_error(d + 1) sum|g| / d + |xh| sum_error(d + 4) sum|g xh| / d); dres one more
// rounding. The column sums: rows terms, each with its own error (dw's: 3 roundings; next_db's:
// dres's bound).
struct LnCase {
  std::size_t rows;
  int d;
  unsigned grid;  // 0: as the step launches it
};

void run_layer_norm_backward(const LnCase& cs, std::uint64_t seed, bool positive, bool dy_in_bf16 = false) {
  lab::Rng rng(seed);
  const std::size_t rows = cs.rows, n = rows * std::size_t(cs.d);
  const int d = cs.d;
  std::vector<float> x = uniform(rng, n, -1.f, 1.f), w = uniform(rng, d, 0.5f, 1.5f);
  std::vector<float> dy = positive ? uniform(rng, n, 0.2f, 1.f) : uniform(rng, n, -1.f, 1.f);
  if (dy_in_bf16)
    for (float& v : dy) v = round_bf16(v);
  std::vector<float> dres = positive ? uniform(rng, n, 2.f, 3.f) : uniform(rng, n, -1.f, 1.f);
  std::vector<float> mean(rows), rstd(rows);
  for (std::size_t r = 0; r < rows; ++r) {  // the row's statistics, then fp32 values both sides read
    double s = 0, q = 0;
    for (int j = 0; j < d; ++j) s += x[r * d + j];
    const double mu = s / d;
    for (int j = 0; j < d; ++j) q += (x[r * d + j] - mu) * (x[r * d + j] - mu);
    mean[r] = float(mu), rstd[r] = float(1 / std::sqrt(q / d + gpt2::kLayerNormEps));
  }
  auto dx_d = device(x), w_d = device(w), dy_d = device(dy), dres_d = device(dres), mean_d = device(mean),
       rstd_d = device(rstd), dres_fp32_dy = device(dres);
  auto dy_bf = device(to_bf16(dy));
  lab::DeviceBuffer<float> dw_d(d), db_d(d), ndb_d(d), scratch(3 * std::size_t(d));
  lab::DeviceBuffer<bf16> ndy_d(n);
  lab::poison(ndy_d);
  for (auto* b : {&dw_d, &db_d, &ndb_d}) LAB_CHECK(cudaMemset(b->data(), 0, d * sizeof(float)));
  LAB_CHECK(cudaMemset(scratch.data(), 0, scratch.size() * sizeof(float)));
  const unsigned grid = cs.grid ? cs.grid : static_cast<unsigned>(std::min<std::size_t>(rows, 512));
  auto launch = [&](const auto* dyp, float* dres_p, float* dw, float* db, float* ndb) {
    using Dy = std::remove_cvref_t<decltype(*dyp)>;
    with_vec_items(d, [&](auto items, auto v) {
      layer_norm_backward_kernel<decltype(items)::value, decltype(v)::value, bf16, Dy><<<grid, kThreads>>>(
          dyp, dx_d.data(), w_d.data(), mean_d.data(), rstd_d.data(), dres_p, dw, db, rows, d, true,
          ndb == ndb_d.data() ? ndy_d.data() : nullptr, ndb);
    });
    LAB_CHECK(cudaGetLastError());
  };
  if (dy_in_bf16) {
    launch(dy_bf.data(), dres_d.data(), dw_d.data(), db_d.data(), ndb_d.data());
    // The same values read in fp32: the rows' outputs bit for bit (the column sums' atomics add in
    // another order).
    launch(dy_d.data(), dres_fp32_dy.data(), scratch.data(), scratch.data() + d, scratch.data() + 2 * d);
  } else {
    launch(dy_d.data(), dres_d.data(), dw_d.data(), db_d.data(), ndb_d.data());
  }
  LAB_CHECK(cudaDeviceSynchronize());

  std::vector<double> r_dres(n), e_dres(n), r_dw(d, 0), e_dw(d, 0), r_db(d, 0), e_db(d, 0), r_ndb(d, 0),
      e_ndb(d, 0), m_dw(d, 0), m_db(d, 0), m_ndb(d, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    const double mu = mean[r], rs = rstd[r];
    lab::Sum sg, sgx;
    std::vector<double> xh(d), g(d);
    for (int j = 0; j < d; ++j) {
      xh[j] = (x[r * d + j] - mu) * rs, g[j] = double(dy[r * d + j]) * w[j];
      sg.add(g[j]), sgx.add(g[j] * xh[j]);
    }
    const double mg = sg.value / d, mgx = sgx.value / d, ag = sg.magnitude / d, agx = sgx.magnitude / d;
    const double e_mg = sum_error(d + 1) * ag, e_mgx = sum_error(d + 4) * agx;
    for (int j = 0; j < d; ++j) {
      const std::size_t i = r * d + j;
      const double dx = rs * (g[j] - mg - xh[j] * mgx);
      const double terms = std::fabs(g[j]) + ag + std::fabs(xh[j]) * agx;
      const double e_dx = std::fabs(rs) * (8 * kU * terms + e_mg + std::fabs(xh[j]) * e_mgx) * (1 + 16 * kU);
      r_dres[i] = dres[i] + dx;
      e_dres[i] = e_dx + kU * (std::fabs(dres[i]) + std::fabs(dx)) * (1 + kU);
      r_dw[j] += dy[i] * xh[j], m_dw[j] += std::fabs(dy[i] * xh[j]);
      r_db[j] += dy[i], m_db[j] += std::fabs(dy[i]);
      r_ndb[j] += r_dres[i], m_ndb[j] += std::fabs(r_dres[i]), e_ndb[j] += e_dres[i];
    }
  }
  for (int j = 0; j < d; ++j) {
    e_dw[j] = sum_error(double(rows) + 3) * m_dw[j];
    e_db[j] = sum_error(double(rows)) * m_db[j];
    e_ndb[j] += sum_error(double(rows)) * m_ndb[j];
  }
  const std::vector<float> got_ndy = to_float(ndy_d.download()), got_dres = dres_d.download();
  EXPECT_PASSES(judge(got_dres, r_dres, e_dres, 0, "dres"));
  if (dy_in_bf16) {
    const std::vector<float> fp32_dy = dres_fp32_dy.download();
    EXPECT_PASSES(lab::compare(got_dres, std::vector<double>(fp32_dy.begin(), fp32_dy.end()),
                               lab::Tolerance::exact(), "dres with dy read in bf16, against dy's values in fp32"));
  }
  // next_dy is dres rounded, exactly: the same fp32 value both ways.
  std::vector<double> rounded(n);
  for (std::size_t i = 0; i < n; ++i) rounded[i] = round_bf16(got_dres[i]);
  EXPECT_PASSES(lab::compare(got_ndy, rounded, lab::Tolerance::exact(), "next_dy against dres rounded"));
  EXPECT_PASSES(judge(got_ndy, r_dres, rounded_slack(e_dres), kUb, "next_dy (bf16)"));
  EXPECT_PASSES(judge(dw_d.download(), r_dw, e_dw, 0, "dw"));
  EXPECT_PASSES(judge(db_d.download(), r_db, e_db, 0, "db"));
  EXPECT_PASSES(judge(ndb_d.download(), r_ndb, e_ndb, 0, "next_db"));
}

// Every case, with dy in fp32 or in bf16. d: four columns a thread (768, GPT-2 small; 2052, three
// items), one (67); rows off the grid.
void run_layer_norm_backward_cases(bool dy_in_bf16) {
  const std::uint64_t seed = lab::testing::run_seed();
  for (const LnCase& cs : {LnCase{300, 768, 0}, LnCase{37, 2052, 0}, LnCase{700, 67, 0}, LnCase{129, 768, 1},
                            LnCase{2000, 1600, 0}})
    for (bool positive : {true, false}) {
      SCOPED_TRACE("rows " + std::to_string(cs.rows) + ", d " + std::to_string(cs.d) + ", grid " +
                   std::to_string(cs.grid) + (positive ? ", positive terms" : ", signed terms") +
                   (dy_in_bf16 ? ", dy in bf16" : ""));
      run_layer_norm_backward(cs, seed, positive, dy_in_bf16);
    }
}

TEST(RowKernels, LayerNormBackwardBf16) {
  LAB_REQUIRE_GPU();
  run_layer_norm_backward_cases(false);
}

// The same with dy in bf16, as step 20's products write it (optimized_gpt2_step_fused_bf16_ln_grads).
TEST(RowKernels, LayerNormBackwardBf16Dy) {
  LAB_REQUIRE_GPU();
  run_layer_norm_backward_cases(true);
}

// ---------------------------------------------------------------------------------------------
// gelu_backward_sum_kernel<bf16, bf16>, launched as the step does (column_owner_grid(rows, cols/4)):
//   dh = g gelu'(h) in bf16, db += sum over rows of g gelu'(h) (fp32 values); with g in bf16, also
//   gelu_backward_act_kernel<bf16, bf16> (step 13), which writes dh over g and act = gelu(h).
// gelu'(x) and gelu(x) as the kernels compute them, and their fp32 errors: gelu_reference.cuh.

// g_in_bf16: g as the MLP's second product writes it when its input gradient is in bf16 (step 11:
// the same arithmetic on the rounded g, read 8 bytes at a time).
void run_gelu_backward_sum(std::size_t rows, int cols, std::uint64_t seed, bool positive, bool g_in_bf16) {
  lab::Rng rng(seed);
  const std::size_t n = rows * std::size_t(cols);
  // Positive terms: g > 0 and h in [-0.5, 3], where gelu' > 0.13; signed: both across zero.
  std::vector<float> g = positive ? uniform(rng, n, 0.1f, 1.f) : uniform(rng, n, -1.f, 1.f);
  std::vector<float> h = positive ? uniform(rng, n, -0.5f, 3.f) : uniform(rng, n, -4.f, 4.f);
  for (float& v : h) v = round_bf16(v);  // the pre-activation is saved in bf16
  if (g_in_bf16)
    for (float& v : g) v = round_bf16(v);
  auto g_d = device(g);
  auto g_bf = device(to_bf16(g));
  auto h_d = device(to_bf16(h));
  lab::DeviceBuffer<bf16> dh_d(n);
  lab::poison(dh_d);
  lab::DeviceBuffer<float> db_d(cols);
  LAB_CHECK(cudaMemset(db_d.data(), 0, cols * sizeof(float)));
  auto launch = [&](const auto* gp) {
    gelu_backward_sum_kernel<bf16, bf16><<<column_owner_grid(rows, cols / 4), kThreads>>>(gp, h_d.data(), dh_d.data(),
                                                                                       db_d.data(), rows, cols / 4);
  };
  if (g_in_bf16) launch(g_bf.data());
  else launch(g_d.data());
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaDeviceSynchronize());
  std::vector<double> r_dh(n), e_dh(n), r_db(cols, 0), e_db(cols, 0), m_db(cols, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = g[i] * dgelu_ref(h[i]);
    r_dh[i] = v;
    e_dh[i] = std::fabs(g[i]) * dgelu_error(h[i]) + kU * std::fabs(v);
    const int c = int(i % cols);
    r_db[c] += v, m_db[c] += std::fabs(v), e_db[c] += e_dh[i];
  }
  for (int c = 0; c < cols; ++c) e_db[c] += sum_error(double(rows)) * m_db[c];
  const std::vector<float> dh = to_float(dh_d.download());
  EXPECT_PASSES(judge(dh, r_dh, rounded_slack(e_dh), kUb, "dh (bf16)"));
  EXPECT_PASSES(judge(db_d.download(), r_db, e_db, 0, "db"));
  if (!g_in_bf16) return;
  // gelu_backward_act_kernel (step 13) on the same inputs: dh written over g, bit for bit the dh
  // above (the same operations on the same erf), act = gelu(h) bit for bit gelu_kernel's (the values
  // the forward wrote), and db within the same bound (its own sums, as the kernel above sums them).
  lab::DeviceBuffer<bf16> act_d(n), again_d(n);
  lab::poison(act_d), lab::poison(again_d);
  LAB_CHECK(cudaMemset(db_d.data(), 0, cols * sizeof(float)));
  gelu_backward_act_kernel<bf16, bf16><<<column_owner_grid(rows, cols / 4), kThreads>>>(g_bf.data(), h_d.data(),
                                                                                       act_d.data(), db_d.data(),
                                                                                       rows, cols / 4);
  gelu_kernel<1><<<blocks_for(n / 4), kThreads>>>(h_d.data(), again_d.data(), n / 4);
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaDeviceSynchronize());
  std::vector<double> r_act(n), e_act(n);
  for (std::size_t i = 0; i < n; ++i) r_act[i] = gelu_ref(h[i]), e_act[i] = gelu_error(h[i]);
  const std::vector<float> act = to_float(act_d.download());
  EXPECT_PASSES(lab::compare(to_float(g_bf.download()), std::vector<double>(dh.begin(), dh.end()),
                             lab::Tolerance::exact(), "dh over g against gelu_backward_sum_kernel's dh"));
  EXPECT_PASSES(judge(act, r_act, rounded_slack(e_act), kUb, "act (bf16)"));
  const std::vector<float> again = to_float(again_d.download());
  EXPECT_PASSES(lab::compare(act, std::vector<double>(again.begin(), again.end()), lab::Tolerance::exact(),
                             "act against gelu_kernel's"));
  EXPECT_PASSES(judge(db_d.download(), r_db, e_db, 0, "db (with act)"));
  // gelu_backward_act_in_flight (step 14) on the same inputs: dh and act bit for bit the kernel's
  // above, db within the same bound (the same sums in another order). Where it does not fit (cols
  // not a multiple of 8, or a tensor not 16-byte aligned) it runs the kernel above: that path too.
  for (const bool offset : {false, true}) {
    SCOPED_TRACE(offset ? "in flight, h 8 bytes off 16-byte alignment (the kernel above)" : "in flight");
    auto g_again = device(to_bf16(g));
    lab::DeviceBuffer<bf16> h_off(n + 4), act_again(n);
    lab::poison(act_again);
    bf16* const h_at = h_off.data() + (offset ? 4 : 0);
    LAB_CHECK(cudaMemcpy(h_at, h_d.data(), n * sizeof(bf16), cudaMemcpyDeviceToDevice));
    LAB_CHECK(cudaMemset(db_d.data(), 0, cols * sizeof(float)));
    EXPECT_EQ(gelu_in_flight_fits(g_again.data(), h_at, act_again.data(), cols), !offset && cols % 8 == 0);
    gelu_backward_act_in_flight(g_again.data(), h_at, act_again.data(), db_d.data(), rows, cols, nullptr);
    LAB_CHECK(cudaDeviceSynchronize());
    EXPECT_PASSES(lab::compare(to_float(g_again.download()), std::vector<double>(dh.begin(), dh.end()),
                               lab::Tolerance::exact(), "dh (in flight) against gelu_backward_sum_kernel's dh"));
    EXPECT_PASSES(lab::compare(to_float(act_again.download()), std::vector<double>(act.begin(), act.end()),
                               lab::Tolerance::exact(), "act (in flight) against gelu_backward_act_kernel's"));
    EXPECT_PASSES(judge(db_d.download(), r_db, e_db, 0, "db (in flight)"));
  }
}

TEST(RowKernels, GeluBackwardSumBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  // cols = 4 d: GPT-2 small's 3072, and 4 x 67 (a grid's last block partly past the columns; for
  // step 14's kernel, not a multiple of 8), 8 x 167 (its last block of 128 threads partly past them)
  // and 3 rows (fewer than the four it takes at a time; 517 leaves one past a multiple of four).
  const struct {
    std::size_t rows;
    int cols;
  } cases[] = {{517, 3072}, {2000, 268}, {1000, 1336}, {3, 3072}};
  for (const auto& [rows, cols] : cases)
    for (bool positive : {true, false})
      for (bool g_in_bf16 : {false, true}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols) +
                     (positive ? ", positive terms" : ", signed terms") + (g_in_bf16 ? ", g in bf16" : ""));
        run_gelu_backward_sum(rows, cols, seed, positive, g_in_bf16);
      }
}

// ---------------------------------------------------------------------------------------------
// qkv_rows_sum_kernel<bf16>: dQ, dK, dV by head (B h T dp, dp >= hd the flash width) into the rows
// of dQKV (B T x 3d) in bf16, each exactly the host's rounding of the same fp32 value (a copy and a
// rounding), and db += each column's sum over the rows (rows terms). With first/parts, only those
// thirds (step 9 writes dQ's alone): the other columns keep what they held.
void run_qkv_rows_sum(int batch, int context, int heads, int hd, int dp, int first, int parts, std::uint64_t seed,
                      bool positive) {
  lab::Rng rng(seed);
  const int d = heads * hd;
  const std::size_t rows = std::size_t(batch) * context, nh = rows * heads * dp;
  std::vector<float> src[3];
  for (auto& s : src) s = positive ? uniform(rng, nh, 0.1f, 1.f) : uniform(rng, nh, -1.f, 1.f);
  auto q_d = device(src[0]), k_d = device(src[1]), v_d = device(src[2]);
  const std::vector<float> before = uniform(rng, rows * 3 * d, -8.f, 8.f);  // what columns not written keep
  auto dqkv_d = device(to_bf16(before));
  lab::DeviceBuffer<float> db_d(3 * d);
  LAB_CHECK(cudaMemset(db_d.data(), 0, 3 * d * sizeof(float)));
  qkv_rows_sum_kernel<bf16><<<column_owner_grid(rows, parts * d), kThreads>>>(
      q_d.data(), k_d.data(), v_d.data(), dqkv_d.data(), db_d.data(), rows, context, heads, hd, dp, first, parts);
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaDeviceSynchronize());
  std::vector<double> r_rows(rows * 3 * d), r_db(3 * d, 0), e_db(3 * d, 0);
  for (std::size_t i = 0; i < r_rows.size(); ++i) r_rows[i] = round_bf16(before[i]);
  for (int part = first; part < first + parts; ++part)
    for (std::size_t r = 0; r < rows; ++r)
      for (int c = 0; c < d; ++c) {
        const std::size_t b = r / context, t = r % context, head = c / hd;
        const float v = src[part][((b * heads + head) * context + t) * dp + c % hd];
        r_rows[r * 3 * d + part * d + c] = round_bf16(v);
        r_db[part * d + c] += v, e_db[part * d + c] += std::fabs(v);
      }
  for (double& e : e_db) e *= sum_error(double(rows));
  EXPECT_PASSES(lab::compare(to_float(dqkv_d.download()), r_rows, lab::Tolerance::exact(), "dqkv rows (bf16)"));
  EXPECT_PASSES(judge(db_d.download(), r_db, e_db, 0, "db"));
}

TEST(RowKernels, QkvRowsSumBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  struct Case {
    int batch, context, heads, hd, dp, first, parts;
  };
  // GPT-2-like heads of 64; heads of 24 padded to 32; step 9's dQ third alone. The last two give
  // a block many rows to walk (rows past the grid's height), its row stride short of the context
  // (341 against 1000) and past it (1024 against 100): b and t carried across batch boundaries.
  for (const Case& c : {Case{2, 130, 4, 64, 64, 0, 3}, Case{3, 77, 3, 24, 32, 0, 3}, Case{2, 100, 4, 64, 64, 0, 1},
                        Case{4, 1000, 4, 64, 64, 0, 3}, Case{20, 100, 4, 64, 64, 0, 1}})
    for (bool positive : {true, false}) {
      SCOPED_TRACE("B " + std::to_string(c.batch) + " T " + std::to_string(c.context) + " h " +
                   std::to_string(c.heads) + " hd " + std::to_string(c.hd) + " dp " + std::to_string(c.dp) +
                   " parts " + std::to_string(c.first) + "+" + std::to_string(c.parts) +
                   (positive ? ", positive terms" : ", signed terms"));
      run_qkv_rows_sum(c.batch, c.context, c.heads, c.hd, c.dp, c.first, c.parts, seed, positive);
    }
}

// ---------------------------------------------------------------------------------------------
// cross_entropy_rows_kernel<Items, true, bf16>, Items as the step picks them (with_row_items: the
// vocabulary over 1024 threads, rounded up to 1, 2, 4, 8 or 16): loss = max + log sum exp(z - max) - z[target],
// dz = (exp(z - max) / sum - onehot) / rows in bf16.
// fp32 errors: z - max one rounding (u |z - max|, which expf's value takes relatively), expf 2 ulp
// (4u); the sum of V terms (sum_error(V) of it, plus the terms' own); 1 / sum and the product two
// roundings, the onehot's subtraction one, 1 / rows and the product two; logf 1 ulp (2u) and the
// loss's two additions. bf16_logits: the logits in bf16 (exact values, the reference's own) and dz
// written over them, as optimized_gpt2_step_fused_bf16_logits runs it; past 16384 classes (bf16
// logits only) cross_entropy_pairs_kernel, the same arithmetic with the row two logits a register.
// vecs (bf16 logits only): cross_entropy_vecs_kernel, as step 16 runs it (with_row_vecs: 16-byte
// loads, 256 threads a row), the same arithmetic with the sum in another order, so the same bounds.
void run_cross_entropy_rows(std::size_t rows, int vocab, std::uint64_t seed, bool bf16_logits, bool vecs = false) {
  lab::Rng rng(seed);
  std::vector<float> z = uniform(rng, rows * vocab, -6.f, 6.f);
  if (bf16_logits)
    for (float& v : z) v = round_bf16(v);
  std::vector<std::int32_t> targets(rows);
  rng.integers(std::span<std::int32_t>(targets), 0, vocab);
  auto z_d = device(z);
  auto zb_d = device(to_bf16(z));
  auto t_d = device(targets);
  lab::DeviceBuffer<float> loss_d(rows);
  lab::DeviceBuffer<bf16> dz_d(rows * vocab);
  lab::poison(loss_d), lab::poison(dz_d);
  const float inv_rows = 1.f / float(rows);
  auto launch = [&](auto items) {
    constexpr int kItems = decltype(items)::value;
    if (bf16_logits)
      cross_entropy_rows_kernel<kItems, true, bf16, bf16><<<unsigned(rows), kRowThreads>>>(
          zb_d.data(), t_d.data(), loss_d.data(), vocab, inv_rows, zb_d.data());
    else
      cross_entropy_rows_kernel<kItems, true, bf16><<<unsigned(rows), kRowThreads>>>(
          z_d.data(), t_d.data(), loss_d.data(), vocab, inv_rows, dz_d.data());
  };
  // Past 16 x 1024 classes the step holds bf16 logits two a register (cross_entropy_pairs_kernel):
  // the same arithmetic, so the same bounds.
  auto launch_pairs = [&](auto pairs) {
    cross_entropy_pairs_kernel<decltype(pairs)::value, true><<<unsigned(rows), kRowThreads>>>(
        zb_d.data(), t_d.data(), loss_d.data(), vocab, inv_rows, zb_d.data());
  };
  auto launch_vecs = [&](auto n) {
    cross_entropy_vecs_kernel<decltype(n)::value, true><<<unsigned(rows), kVecRowThreads>>>(
        zb_d.data(), t_d.data(), loss_d.data(), vocab, inv_rows, zb_d.data());
  };
  if (vecs)
    ASSERT_TRUE(bf16_logits && with_row_vecs(vocab, zb_d.data(), launch_vecs)) << "vocab " << vocab << " is past it";
  else
    ASSERT_TRUE(with_row_items(vocab, launch) || (bf16_logits && with_row_pairs(vocab, launch_pairs)))
        << "vocab " << vocab << " is past the rows kernels";
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaDeviceSynchronize());
  if (bf16_logits) LAB_CHECK(cudaMemcpy(dz_d.data(), zb_d.data(), dz_d.size() * sizeof(bf16), cudaMemcpyDeviceToDevice));
  std::vector<double> r_loss(rows), e_loss(rows), r_dz(rows * vocab), e_dz(rows * vocab);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* zr = z.data() + r * vocab;
    const double mx = *std::max_element(zr, zr + vocab);
    double s = 0, e_terms = 0;
    for (int j = 0; j < vocab; ++j) {
      const double e = std::exp(zr[j] - mx);
      s += e, e_terms += e * (4 * kU + kU * std::fabs(zr[j] - mx)) * (1 + 8 * kU);
    }
    const double e_s = e_terms + sum_error(vocab) * s, rel_s = e_s / s;  // the sum's relative error
    const double ls = std::log(s);
    r_loss[r] = mx + ls - zr[targets[r]];
    e_loss[r] = rel_s * (1 + 2 * rel_s) + 2 * kU * std::fabs(ls) + 2 * kU * (std::fabs(mx) + std::fabs(ls) + std::fabs(zr[targets[r]]));
    for (int j = 0; j < vocab; ++j) {
      const double p = std::exp(zr[j] - mx) / s, hot = j == targets[r] ? 1.0 : 0.0, v = p - hot;
      const double e_p = p * ((4 * kU + kU * std::fabs(zr[j] - mx)) * (1 + 8 * kU) + rel_s * (1 + 2 * rel_s) + 2 * kU);
      r_dz[r * vocab + j] = v / double(rows);
      e_dz[r * vocab + j] = ((e_p + kU * std::fabs(v)) / double(rows) + 2 * kU * std::fabs(v) / double(rows)) * (1 + 4 * kU);
    }
  }
  EXPECT_PASSES(judge(loss_d.download(), r_loss, e_loss, 0, "loss"));
  EXPECT_PASSES(judge(to_float(dz_d.download()), r_dz, rounded_slack(e_dz), kUb, "dz (bf16)"));
}

TEST(RowKernels, CrossEntropyRowsBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  // One item a thread (97), four (3001), sixteen (the lab's GPT-2 vocabulary, 10000); the logits
  // in fp32, then in bf16 with the gradient written over them.
  const struct {
    std::size_t rows;
    int vocab;
  } cases[] = {{64, 97}, {37, 3001}, {23, 10000}};
  for (bool bf16_logits : {false, true})
    for (const auto& [rows, vocab] : cases) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", vocab " + std::to_string(vocab) +
                   (bf16_logits ? ", bf16 logits, dz in place" : ", fp32 logits"));
      run_cross_entropy_rows(rows, vocab, seed, bf16_logits);
    }
  // bf16 logits past 16 x 1024 classes, two a register (cross_entropy_pairs_kernel): the fewest
  // pairs a thread (16: 16386), one pair past a step (20: 32770), GPT-2's padded vocabulary (28:
  // 50304), the most (28: 57344).
  const struct {
    std::size_t rows;
    int vocab, pairs;
  } long_cases[] = {{11, 16386, 16}, {7, 32770, 20}, {9, 50304, 28}, {5, 57344, 28}};
  for (const auto& [rows, vocab, pairs] : long_cases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", vocab " + std::to_string(vocab) + ", bf16 logits in pairs");
    ASSERT_FALSE(with_row_items(vocab, [](auto) {}));
    int chosen = 0;
    ASSERT_TRUE(with_row_pairs(vocab, [&](auto p) { chosen = decltype(p)::value; }));
    EXPECT_EQ(chosen, pairs);
    run_cross_entropy_rows(rows, vocab, seed, true);
  }
}

// cross_entropy_vecs_kernel (step 16) at the vectors a thread with_row_vecs picks: one (8 and 2048
// classes), two (3000), five (the lab's GPT-2 vocabulary, 10000), eight from seven (12296: 1537
// vectors) and eight (16384, the most); and the vocabularies it leaves to the other kernels (not a
// multiple of 8, past 16384, logits not 16-byte aligned).
TEST(RowKernels, CrossEntropyVecsBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  const struct {
    std::size_t rows;
    int vocab, vecs;
  } cases[] = {{5, 8, 1}, {19, 2048, 1}, {37, 3000, 2}, {23, 10000, 5}, {13, 12296, 8}, {7, 16384, 8}};
  for (const auto& [rows, vocab, vecs] : cases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", vocab " + std::to_string(vocab) + ", 16-byte vectors");
    int chosen = 0;
    ASSERT_TRUE(with_row_vecs(vocab, nullptr, [&](auto n) { chosen = decltype(n)::value; }));
    EXPECT_EQ(chosen, vecs);
    run_cross_entropy_rows(rows, vocab, seed, true, true);
  }
  alignas(16) static const bf16 row[16] = {};
  for (int vocab : {9, 10002, 16392}) EXPECT_FALSE(with_row_vecs(vocab, row, [](auto) {})) << vocab;
  EXPECT_FALSE(with_row_vecs(16, row + 1, [](auto) {})) << "logits 2 bytes past a 16-byte boundary";
}

// ---------------------------------------------------------------------------------------------
// small_grads_kernel: the seven small gradients zeroed, the MLP's second bias gradient moved from
// carry into place and carry zeroed (exact: stores of zeros and a copy).
TEST(RowKernels, SmallGradsZeroesAndMovesTheCarry) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  for (int d : {768, 67}) {
    SCOPED_TRACE("d " + std::to_string(d));
    const int counts[SmallGrads::kParts] = {d, d, 3 * d, d, d, d, 4 * d};
    std::vector<lab::DeviceBuffer<float>> parts;
    SmallGrads g{};
    for (int t = 0; t < SmallGrads::kParts; ++t) {
      parts.push_back(device(uniform(rng, counts[t], 1.f, 2.f)));
      g.zero[t] = parts.back().data(), g.count[t] = counts[t];
    }
    const std::vector<float> carry = uniform(rng, d, -1.f, 1.f);
    auto carry_d = device(carry), fc2_d = device(uniform(rng, d, 5.f, 6.f));
    g.carry = carry_d.data(), g.fc2_b = fc2_d.data(), g.d = d;
    small_grads_kernel<<<blocks_for(4 * std::size_t(d)), kThreads>>>(g);
    LAB_CHECK(cudaGetLastError());
    LAB_CHECK(cudaDeviceSynchronize());
    for (int t = 0; t < SmallGrads::kParts; ++t)
      EXPECT_PASSES(lab::compare(parts[t].download(), std::vector<double>(counts[t], 0.0), lab::Tolerance::exact(),
                                 "zeroed part " + std::to_string(t)));
    EXPECT_PASSES(lab::compare(fc2_d.download(), std::vector<double>(carry.begin(), carry.end()),
                               lab::Tolerance::exact(), "fc2_b (the carry moved)"));
    EXPECT_PASSES(lab::compare(carry_d.download(), std::vector<double>(d, 0.0), lab::Tolerance::exact(), "carry"));
  }
}

// ---------------------------------------------------------------------------------------------
// residual_layer_norm_kernel<Items, bf16>, a block a row as FusedStep::residual_layer_norm launches
// it: v = x + (y + bias), mean, rstd = rsqrtf(var + eps), ln = (v - mean) rstd w + b in bf16.
// fp32 errors: v two roundings; the mean a sum of d terms of two roundings, then 1 / d and a
// product; (v - mean) one more, its square one, their sum d; the variance's 1 / d, product, eps
// and eps's own rounding four; rsqrtf 2 ulp (4u) and half the variance's relative error (to first order, times
// 1 + that error beyond it); ln's two products and its addition.
void run_residual_layer_norm(std::size_t rows, int d, bool residual, std::uint64_t seed) {
  lab::Rng rng(seed);
  const std::size_t n = rows * std::size_t(d);
  const std::vector<float> x = uniform(rng, n, -1.f, 3.f), y = uniform(rng, n, -2.f, 2.f), bias = uniform(rng, d, -1.f, 1.f),
                           w = uniform(rng, d, 0.5f, 1.5f), b = uniform(rng, d, -0.5f, 0.5f);
  auto x_d = device(x), y_d = device(y), bias_d = device(bias), w_d = device(w), b_d = device(b);
  lab::DeviceBuffer<float> xo_d(n), mean_d(rows), rstd_d(rows);
  lab::DeviceBuffer<bf16> ln_d(n);
  lab::poison(xo_d), lab::poison(mean_d), lab::poison(rstd_d), lab::poison(ln_d);
  with_items(d, [&](auto items) {
    residual_layer_norm_kernel<decltype(items)::value, bf16><<<unsigned(rows), kThreads>>>(
        x_d.data(), residual ? y_d.data() : nullptr, residual ? bias_d.data() : nullptr, xo_d.data(), w_d.data(),
        b_d.data(), ln_d.data(), mean_d.data(), rstd_d.data(), d);
  });
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaDeviceSynchronize());
  std::vector<double> r_v(n), e_v(n), r_ln(n), e_ln(n), r_mean(rows), e_mean(rows), r_rstd(rows), e_rstd(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = 0, mag = 0, e_terms = 0;
    for (int j = 0; j < d; ++j) {
      const std::size_t i = r * d + j;
      const double t = residual ? double(y[i]) + bias[j] : 0.0;
      r_v[i] = x[i] + t;
      e_v[i] = residual ? kU * (std::fabs(t) + std::fabs(r_v[i])) * (1 + kU) : 0.0;
      sum += r_v[i], mag += std::fabs(r_v[i]), e_terms += e_v[i];
    }
    const double mu = sum / d;
    const double e_mu = ((e_terms + sum_error(double(d)) * mag) / d + 2 * kU * std::fabs(mu)) * (1 + 4 * kU);
    double q = 0, e_q = 0;
    std::vector<double> e_a(d);
    for (int j = 0; j < d; ++j) {
      const std::size_t i = r * d + j;
      const double a = r_v[i] - mu;
      e_a[j] = (e_v[i] + e_mu + kU * std::fabs(a)) * (1 + 2 * kU);
      q += a * a;
      e_q += (2 * std::fabs(a) * e_a[j] + e_a[j] * e_a[j]) * (1 + kU) + kU * a * a;
    }
    e_q += sum_error(double(d)) * q;
    const double var = q / d + gpt2::kLayerNormEps;
    const double eps_rel = (e_q / d + 4 * kU * var) / var;  // the variance's relative error, with eps
    const double rs = 1 / std::sqrt(var);
    const double rs_rel = (0.5 * eps_rel * (1 + eps_rel) + 4 * kU) * (1 + 4 * kU);
    r_mean[r] = mu, e_mean[r] = e_mu, r_rstd[r] = rs, e_rstd[r] = rs_rel * rs;
    for (int j = 0; j < d; ++j) {
      const std::size_t i = r * d + j;
      const double a = r_v[i] - mu, z = a * rs * w[j] + b[j];
      r_ln[i] = z;
      e_ln[i] = (std::fabs(w[j]) * rs * (e_a[j] + std::fabs(a) * rs_rel + 2 * kU * std::fabs(a)) + kU * std::fabs(z)) *
                (1 + 4 * kU + 2 * rs_rel);
    }
  }
  if (residual) EXPECT_PASSES(judge(xo_d.download(), r_v, e_v, 0, "x_out"));
  EXPECT_PASSES(judge(mean_d.download(), r_mean, e_mean, 0, "mean"));
  EXPECT_PASSES(judge(rstd_d.download(), r_rstd, e_rstd, 0, "rstd"));
  EXPECT_PASSES(judge(to_float(ln_d.download()), r_ln, rounded_slack(e_ln), kUb, "ln (bf16)"));

  // layer_norm_again_kernel, from the mean and rstd just written and the same rows (x_out, or x
  // where there is no residual), as the backward calls it: "the forward's expression on the same
  // fp32 values, so the same output": equal to the forward's ln, bit for bit.
  lab::DeviceBuffer<bf16> again_d(n);
  lab::poison(again_d);
  const float* rows_in = residual ? xo_d.data() : x_d.data();
  layer_norm_again(rows_in, mean_d.data(), rstd_d.data(), w_d.data(), b_d.data(), again_d.data(), rows, d, nullptr);
  LAB_CHECK(cudaDeviceSynchronize());
  const std::vector<float> ln_got = to_float(ln_d.download());
  EXPECT_PASSES(lab::compare(to_float(again_d.download()), std::vector<double>(ln_got.begin(), ln_got.end()),
                             lab::Tolerance::exact(), "ln again against the forward's ln"));
}

TEST(RowKernels, ResidualLayerNormAndAgainBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  const struct {
    std::size_t rows;
    int d;
  } cases[] = {{64, 768}, {9, 1600}, {33, 67}, {5, 4096}};
  for (const auto& [rows, d] : cases)
    for (bool residual : {true, false}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", d " + std::to_string(d) + (residual ? ", residual" : ""));
      run_residual_layer_norm(rows, d, residual, seed);
    }
}

// ---------------------------------------------------------------------------------------------
// Copies and roundings, exact: round_kernel (the weights' bf16 copy), qkv_heads_kernel (Q, K, V by
// head, each the fp32 sum of the product's value and its bias rounded once; zeros in the padding;
// or from rows already rounded with their bias, as the bias epilogue writes them: the same values),
// and bias_gelu_kernel's h (the pre-activation, its bias added in fp32 and rounded once) with its
// act = gelu(h) at the rounded h in bf16 (bounded as gelu_error says), and gelu_kernel's act again
// from h: the same values, bit for bit.
TEST(RowKernels, RoundKernelBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  for (std::size_t n : {std::size_t(4096 * 3 + 8), std::size_t(1001)}) {
    const std::vector<float> x = uniform(rng, n, -3.f, 3.f);
    auto x_d = device(x);
    lab::DeviceBuffer<bf16> y_d(n);
    lab::poison(y_d);
    if (n % 4 == 0) round_kernel<4><<<blocks_for(n / 4), kThreads>>>(x_d.data(), y_d.data(), n);
    else round_kernel<1><<<blocks_for(n), kThreads>>>(x_d.data(), y_d.data(), n);
    LAB_CHECK(cudaGetLastError());
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = round_bf16(x[i]);
    EXPECT_PASSES(lab::compare(to_float(y_d.download()), ref, lab::Tolerance::exact(), "y (bf16)"));
  }
}

TEST(RowKernels, QkvHeadsBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  const struct {
    int batch, context, heads, hd, dp;
  } cases[] = {{2, 65, 4, 64, 64}, {3, 17, 3, 24, 32}, {1, 9, 2, 13, 16}};
  for (const auto& [batch, context, heads, hd, dp] : cases) {
    SCOPED_TRACE("hd " + std::to_string(hd) + ", dp " + std::to_string(dp));
    const int d = heads * hd;
    const std::size_t rows = std::size_t(batch) * context, nh = rows * heads * dp;
    const std::vector<float> qkv = uniform(rng, rows * 3 * d, -2.f, 2.f), bias = uniform(rng, 3 * d, -1.f, 1.f);
    auto qkv_d = device(qkv), bias_d = device(bias);
    lab::DeviceBuffer<bf16> out[3] = {lab::DeviceBuffer<bf16>(nh), lab::DeviceBuffer<bf16>(nh),
                                      lab::DeviceBuffer<bf16>(nh)};
    // The rows in bf16 with their bias, as the bias epilogue writes them (bias null below).
    std::vector<bf16> rows_bf(qkv.size());
    for (std::size_t i = 0; i < qkv.size(); ++i) rows_bf[i] = __float2bfloat16(qkv[i] + bias[i % (3 * d)]);
    auto rows_d = device(rows_bf);
    for (const bool from_bf16 : {false, true}) {
      SCOPED_TRACE(from_bf16 ? "rows in bf16 with their bias" : "rows in fp32, bias apart");
      for (auto& o : out) lab::poison(o);
      auto launch = [&](auto* src, const float* b) {
        if (hd % 4 == 0)
          qkv_heads_kernel<4><<<blocks_for(nh / 4), kThreads>>>(src, b, out[0].data(), out[1].data(), out[2].data(), nh,
                                                               context, heads, hd, dp);
        else
          qkv_heads_kernel<1><<<blocks_for(nh), kThreads>>>(src, b, out[0].data(), out[1].data(), out[2].data(), nh,
                                                           context, heads, hd, dp);
      };
      if (from_bf16) launch(rows_d.data(), nullptr);
      else launch(qkv_d.data(), bias_d.data());
      LAB_CHECK(cudaGetLastError());
      for (int part = 0; part < 3; ++part) {
        std::vector<double> ref(nh);
        for (std::size_t i = 0; i < nh; ++i) {
          const std::size_t c = i % dp, t = i / dp % context, bh = i / (std::size_t(dp) * context);
          const std::size_t row = bh / heads * context + t, col = bh % heads * hd + c;
          ref[i] = c < std::size_t(hd) ? round_bf16(qkv[row * 3 * d + part * d + col] + bias[part * d + col]) : 0.0;
        }
        EXPECT_PASSES(lab::compare(to_float(out[part].download()), ref, lab::Tolerance::exact(),
                                   part == 0 ? "q (bf16)" : part == 1 ? "k (bf16)" : "v (bf16)"));
      }
    }
  }
}

TEST(RowKernels, BiasGeluAndGeluAgainBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  const struct {
    std::size_t rows;
    int d;  // cols = 4 d
  } cases[] = {{50, 768}, {7, 67}};
  for (const auto& [rows, d] : cases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", d " + std::to_string(d));
    const std::size_t n4 = rows * d, n = 4 * n4;  // quads, values
    const std::vector<float> y = uniform(rng, n, -5.f, 5.f), bias = uniform(rng, 4 * d, -1.f, 1.f);
    auto y_d = device(y), bias_d = device(bias);
    lab::DeviceBuffer<bf16> h_d(n), act_d(n), again_d(n);
    lab::poison(h_d), lab::poison(act_d), lab::poison(again_d);
    bias_gelu_kernel<<<blocks_for(n4), kThreads>>>(y_d.data(), bias_d.data(), h_d.data(), act_d.data(), n4, d);
    if (n4 % 2 == 0) gelu_kernel<2><<<blocks_for(n4 / 2), kThreads>>>(h_d.data(), again_d.data(), n4);
    else gelu_kernel<1><<<blocks_for(n4), kThreads>>>(h_d.data(), again_d.data(), n4);
    LAB_CHECK(cudaGetLastError());
    std::vector<double> r_h(n), r_act(n), e_act(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float h = round_bf16(y[i] + bias[i % (4 * d)]);
      r_h[i] = h, r_act[i] = gelu_ref(h), e_act[i] = gelu_error(h);
    }
    const std::vector<float> act = to_float(act_d.download());
    EXPECT_PASSES(lab::compare(to_float(h_d.download()), r_h, lab::Tolerance::exact(), "h (bf16)"));
    EXPECT_PASSES(judge(act, r_act, rounded_slack(e_act), kUb, "act (bf16)"));
    EXPECT_PASSES(lab::compare(to_float(again_d.download()), std::vector<double>(act.begin(), act.end()),
                               lab::Tolerance::exact(), "act again against the forward's act"));
    // The forward alone (steps 10 on): GELU over h in place, the same values.
    if (n4 % 2 == 0) gelu_in_place_kernel<2><<<blocks_for(n4 / 2), kThreads>>>(h_d.data(), n4);
    else gelu_in_place_kernel<1><<<blocks_for(n4), kThreads>>>(h_d.data(), n4);
    LAB_CHECK(cudaGetLastError());
    EXPECT_PASSES(lab::compare(to_float(h_d.download()), std::vector<double>(act.begin(), act.end()),
                               lab::Tolerance::exact(), "act in place over h against the forward's act"));
  }
}

// ---------------------------------------------------------------------------------------------
// dout_heads4_kernel (hd a multiple of 4) and dout_heads_kernel (any hd): dO by head, exactly the
// host's rounding of the fp32 gradient rows (zeros in the padding), and delta = sum over the head's
// columns of dO O (fp32 dO, bf16 O), a sum of hd products: sum_error(hd + 1).
TEST(RowKernels, DoutHeadsBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  const struct {
    int batch, context, heads, hd, dp;
    bool four;
  } cases[] = {{2, 33, 4, 64, 64, true}, {1, 20, 3, 24, 32, true}, {2, 9, 2, 13, 16, false}, {1, 40, 2, 64, 64, false}};
  for (const auto& [batch, context, heads, hd, dp, four] : cases) {
    SCOPED_TRACE("hd " + std::to_string(hd) + ", dp " + std::to_string(dp) + (four ? ", four a thread" : ", a warp"));
    const int d = heads * hd;
    const std::size_t rows = std::size_t(batch) * context, head_rows = rows * heads, nh = head_rows * dp;
    const std::vector<float> datt = uniform(rng, rows * d, -1.f, 1.f);
    std::vector<float> att = uniform(rng, rows * d, -1.f, 1.f);
    for (float& a : att) a = round_bf16(a);
    auto datt_d = device(datt);
    auto att_d = device(to_bf16(att));
    lab::DeviceBuffer<bf16> dout_d(nh);
    lab::DeviceBuffer<float> delta_d(head_rows);
    lab::poison(dout_d), lab::poison(delta_d);
    if (four)
      dout_heads4_kernel<<<unsigned(lab::ceil_div(head_rows * (dp / 4), kThreads)), kThreads>>>(
          datt_d.data(), att_d.data(), dout_d.data(), delta_d.data(), head_rows, context, heads, hd, dp);
    else
      dout_heads_kernel<<<unsigned(lab::ceil_div(head_rows * 32, kThreads)), kThreads>>>(
          datt_d.data(), att_d.data(), dout_d.data(), delta_d.data(), head_rows, context, heads, hd, dp);
    LAB_CHECK(cudaGetLastError());
    std::vector<double> r_dout(nh), r_delta(head_rows, 0), e_delta(head_rows, 0);
    for (std::size_t i = 0; i < nh; ++i) {
      const std::size_t c = i % dp, t = i / dp % context, bh = i / (std::size_t(dp) * context);
      const std::size_t r = (bh / heads * context + t) * d + bh % heads * hd + c;
      if (c >= std::size_t(hd)) {
        r_dout[i] = 0;
        continue;
      }
      r_dout[i] = round_bf16(datt[r]);
      r_delta[i / dp] += double(datt[r]) * att[r], e_delta[i / dp] += std::fabs(double(datt[r]) * att[r]);
    }
    for (double& e : e_delta) e *= sum_error(hd + 1.0);
    EXPECT_PASSES(lab::compare(to_float(dout_d.download()), r_dout, lab::Tolerance::exact(), "dout (bf16)"));
    EXPECT_PASSES(judge(delta_d.download(), r_delta, e_delta, 0, "delta"));
  }
}

// ---------------------------------------------------------------------------------------------
// cross_entropy_kernel<true, bf16> (and with bf16 logits, dz over them), the loss for vocabularies
// above cross_entropy_rows_kernel's 16384 (GPT-2's padded 50304 in fp32; in bf16, the odd ones and
// those past cross_entropy_pairs_kernel's 57344), and mean_kernel. Its running (max, sum) pairs are combined by rescales:
// each term passes through at most vocab / 256 + 13 combines (its thread's, then 5 shuffles and
// the 8 warps' 8), each an expf (2 ulp, its argument's rounding relative |z - max| u), a product and an
// addition, so a term of the sum errs relatively by at most that many times (6u + u range);
// dz as cross_entropy_rows'. The mean: rows losses added and one division.
TEST(RowKernels, CrossEntropyLongRowsAndMeanBf16) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  const struct {
    std::size_t rows;
    int vocab;
    bool bf16_logits;  // the logits in bf16 (exact values), dz written over them
  } cases[] = {{9, 50304, false}, {17, 16385, false}, {9, 50303, true}, {17, 16385, true}, {3, 57346, true}};
  for (const auto& [rows, vocab, bf16_logits] : cases) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", vocab " + std::to_string(vocab) +
                 (bf16_logits ? ", bf16 logits, dz in place" : ", fp32 logits"));
    ASSERT_FALSE(with_row_items(vocab, [](auto) {})) << "the step runs cross_entropy_rows_kernel here";
    if (bf16_logits)  // an odd vocabulary, or past 57344: what the pairs kernel leaves to this one
      ASSERT_FALSE(with_row_pairs(vocab, [](auto) {})) << "the step runs cross_entropy_pairs_kernel here";
    std::vector<float> z = uniform(rng, rows * vocab, -6.f, 6.f);
    if (bf16_logits)
      for (float& v : z) v = round_bf16(v);
    std::vector<std::int32_t> targets(rows);
    rng.integers(std::span<std::int32_t>(targets), 0, vocab);
    auto z_d = device(z);
    auto zb_d = device(to_bf16(z));
    auto t_d = device(targets);
    lab::DeviceBuffer<float> loss_d(rows), mean_d(1);
    lab::DeviceBuffer<bf16> dz_d(rows * vocab);
    lab::poison(loss_d), lab::poison(dz_d), lab::poison(mean_d);
    const float inv_rows = 1.f / float(rows);
    if (bf16_logits)
      cross_entropy_kernel<true, bf16, bf16><<<unsigned(rows), kThreads>>>(zb_d.data(), t_d.data(), loss_d.data(),
                                                                           vocab, inv_rows, zb_d.data());
    else
      cross_entropy_kernel<true, bf16><<<unsigned(rows), kThreads>>>(z_d.data(), t_d.data(), loss_d.data(), vocab,
                                                                     inv_rows, dz_d.data());
    mean_kernel<<<1, kThreads>>>(loss_d.data(), mean_d.data(), rows);
    LAB_CHECK(cudaGetLastError());
    LAB_CHECK(cudaDeviceSynchronize());
    if (bf16_logits) LAB_CHECK(cudaMemcpy(dz_d.data(), zb_d.data(), dz_d.size() * sizeof(bf16), cudaMemcpyDeviceToDevice));
    const double levels = std::ceil(double(vocab) / kThreads) + 13;
    std::vector<double> r_loss(rows), e_loss(rows), r_dz(rows * vocab), e_dz(rows * vocab);
    double r_mean = 0, m_mean = 0, e_sum = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const float* zr = z.data() + r * vocab;
      const double mx = *std::max_element(zr, zr + vocab), range = mx - *std::min_element(zr, zr + vocab);
      const double rel_term = levels * (6 * kU + kU * range) * (1 + levels * 8 * kU);
      double s = 0;
      for (int j = 0; j < vocab; ++j) s += std::exp(zr[j] - mx);
      const double rel_s = rel_term + sum_error(vocab);
      const double ls = std::log(s);
      r_loss[r] = mx + ls - zr[targets[r]];
      e_loss[r] = rel_s * (1 + 2 * rel_s) + 2 * kU * std::fabs(ls) +
                  2 * kU * (std::fabs(mx) + std::fabs(ls) + std::fabs(zr[targets[r]]));
      for (int j = 0; j < vocab; ++j) {
        const double p = std::exp(zr[j] - mx) / s, hot = j == targets[r] ? 1.0 : 0.0, v = p - hot;
        const double e_p = p * ((4 * kU + kU * std::fabs(zr[j] - mx)) * (1 + 8 * kU) + rel_s * (1 + 2 * rel_s) + 2 * kU);
        r_dz[r * vocab + j] = v / double(rows);
        e_dz[r * vocab + j] = ((e_p + 3 * kU * std::fabs(v)) / double(rows)) * (1 + 4 * kU);
      }
      r_mean += r_loss[r], m_mean += std::fabs(r_loss[r]), e_sum += e_loss[r];
    }
    const double e_mean = (e_sum + sum_error(double(rows)) * m_mean) / double(rows) + kU * std::fabs(r_mean) / double(rows);
    EXPECT_PASSES(judge(loss_d.download(), r_loss, e_loss, 0, "loss"));
    EXPECT_PASSES(judge(to_float(dz_d.download()), r_dz, rounded_slack(e_dz), kUb, "dz (bf16)"));
    EXPECT_PASSES(judge(mean_d.download(), {r_mean / double(rows)}, {e_mean * (1 + 4 * kU)}, 0, "mean loss"));
  }
}

}  // namespace
