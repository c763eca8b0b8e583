// lab-arch: sm_90a
// dx_dgelu (gpt2/fused/gelu_product.cuh, step 21): the MLP's second product's input gradient with
// GELU's backward in its epilogue, on exact bf16 inputs against a double reference of its contract,
// bounded by its own arithmetic (the ways of products_test.cu and row_kernels_test.cu together):
//   dact = dY W (rows x cols, a sum of `reduce` exact bf16 products through the tensor cores'
//   truncating fp32 additions: gamma_reduce of sum |dY W|), rounded to bf16 (u_b);
//   dh = dact gelu'(h) (gelu'(h) in fp32 within dgelu_error, the product one rounding) in bf16;
//   act = gelu(h) in bf16, bit for bit gelu_kernel's (no product in it);
//   db += the column sums of the fp32 dh (rows terms, fp32 additions in any order).
// dh's bound is then about 2 u_b of its value (dact's rounding and dh's own) plus the sum's share:
// with the positive inputs (no cancellation in the sum) 0.8%, so that a 1% error fails.
// Every output starts as NaN and one row past the outputs too, which must stay so (rows past the
// last are not written). The shapes: GPT-2 small's reduce (768), a tile's edge in every direction
// (rows not a multiple of 128, cols not a multiple of 128, reduce not a multiple of 64).
// bias_gelu (step 22), the MLP's first product with its bias and GELU from the same product, below.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attention/hopper/flash_tma.cuh"
#include "gpt2/fused/gelu_product.cuh"
#include "lab/device.hpp"
#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "lab/verify.hpp"
#include "tests/kernels/gelu_reference.cuh"
#include "tests/kernels/kernel_testing.cuh"

#pragma nv_diag_suppress 177  // kernels.cuh's helpers this file does not call

namespace {

struct ProductCase {
  int rows, reduce, cols;
  bool positive;  // dY, W > 0 and h where gelu' > 0.13: no cancellation anywhere
};

// count values uniform in [lo, hi], each rounded to bf16: exact inputs for the products.
std::vector<float> bf16_values(lab::Rng& rng, std::size_t count, float lo, float hi) {
  std::vector<float> x = uniform(rng, count, lo, hi);
  for (float& v : x) v = round_bf16(v);
  return x;
}

// The kernels' tests skip without a GPU, and where the Hopper kernels cannot run (the attention's
// own test of that: a GPU that is not sm_90, or a build not for sm_90a).
#define REQUIRE_SM90()                                                                                      \
  do {                                                                                                      \
    LAB_REQUIRE_GPU();                                                                                      \
    if (const std::string why = flashtma::device_supports(lab::current_device()); !why.empty())            \
      GTEST_SKIP() << why;                                                                                  \
  } while (0)

// Each case runs five ways, checked the same: the step's launch (the function's default form, a
// block an SM), and each of the kernel's four forms (7 or 11 epilogue warps, through the TMA or
// direct) on a grid of 2 or 3 blocks, each of which then makes several tiles (the persistent loop:
// its two buffers reused, every barrier's parity turned), which at these shapes a block an SM
// never does.
struct Launch {
  int epi_warps;
  bool direct;
  int blocks;
};
std::vector<Launch> launches(int step_warps, bool step_direct) {
  return {{step_warps, step_direct, 0}, {7, false, 2}, {11, false, 3}, {7, true, 3}, {11, true, 2}};
}
std::string str(const Launch& l) {
  return std::to_string(l.epi_warps) + " epilogue warps, " + (l.direct ? "direct" : "through the TMA") + ", " +
         (l.blocks ? std::to_string(l.blocks) : "an SM's") + " blocks";
}
// f.template operator()<EpiWarps, Direct>() for the launch's form.
template <class F>
void with_form(const Launch& l, F&& f) {
  if (l.epi_warps == 7)
    l.direct ? f.template operator()<7, true>() : f.template operator()<7, false>();
  else
    l.direct ? f.template operator()<11, true>() : f.template operator()<11, false>();
}

void run_dx_dgelu(const ProductCase& pc, std::uint64_t seed) {
  const auto [rows, reduce, cols, positive] = pc;
  lab::Rng rng(seed);
  const std::size_t n = std::size_t(rows) * cols;
  const auto dy = positive ? bf16_values(rng, std::size_t(rows) * reduce, 0.05f, 1.f)
                           : bf16_values(rng, std::size_t(rows) * reduce, -1.f, 1.f);
  const auto w = positive ? bf16_values(rng, std::size_t(reduce) * cols, 0.05f, 1.f)
                          : bf16_values(rng, std::size_t(reduce) * cols, -1.f, 1.f);
  const auto h = positive ? bf16_values(rng, n, -0.5f, 3.f) : bf16_values(rng, n, -4.f, 4.f);
  auto dy_d = device(to_bf16(dy)), w_d = device(to_bf16(w)), h_d = device(to_bf16(h));
  lab::DeviceBuffer<bf16> dh_d(n + cols), act_d(n + cols), again_d(n);  // one row past each output
  lab::poison(again_d);
  lab::DeviceBuffer<float> db_d(cols);
  ASSERT_TRUE(dgelu_product::dx_dgelu_fits(dy_d.data(), w_d.data(), h_d.data(), dh_d.data(), act_d.data(), rows,
                                           reduce, cols));
  gelu_kernel<1><<<blocks_for(n / 4), kThreads>>>(h_d.data(), again_d.data(), n / 4);
  LAB_CHECK(cudaGetLastError());
  const std::vector<float> again = to_float(again_d.download());

  std::vector<double> r_dh(n), e_dh(n), r_db(cols, 0), e_db(cols, 0), m_db(cols, 0);
  std::vector<double> dact(cols), mag(cols);
  for (int i = 0; i < rows; ++i) {
    std::fill(dact.begin(), dact.end(), 0.0), std::fill(mag.begin(), mag.end(), 0.0);
    for (int k = 0; k < reduce; ++k) {
      const double a = dy[std::size_t(i) * reduce + k];
      const float* wr = w.data() + std::size_t(k) * cols;
      for (int c = 0; c < cols; ++c) dact[c] += a * wr[c], mag[c] += std::fabs(a * wr[c]);
    }
    for (int c = 0; c < cols; ++c) {
      const std::size_t at = std::size_t(i) * cols + c;
      const double x = h[at], slope = dgelu_ref(x), e_slope = dgelu_error(x);
      const double e_sum = mag[c] * reduce * 2 * kU / (1 - reduce * 2 * kU);  // the tensor cores' sum
      const double e_dact = e_sum + kUb * (std::fabs(dact[c]) + e_sum);       // and its rounding to bf16
      const double v = dact[c] * slope;
      r_dh[at] = v;
      e_dh[at] = e_dact * (std::fabs(slope) + e_slope) + std::fabs(dact[c]) * e_slope +
                 kU * (std::fabs(dact[c]) + e_dact) * (std::fabs(slope) + e_slope);
      r_db[c] += v, m_db[c] += std::fabs(v), e_db[c] += e_dh[at];
    }
  }
  for (int c = 0; c < cols; ++c) e_db[c] += sum_error(double(rows)) * (m_db[c] + e_db[c]);

  for (const Launch& l : launches(dgelu_product::kEpiWarps, dgelu_product::kDirect)) {
    SCOPED_TRACE(str(l));
    lab::poison(dh_d), lab::poison(act_d);
    LAB_CHECK(cudaMemset(db_d.data(), 0, cols * sizeof(float)));
    with_form(l, [&]<int W, bool D>() {
      dgelu_product::dx_dgelu<W, D>(dy_d.data(), w_d.data(), h_d.data(), dh_d.data(), act_d.data(), db_d.data(), rows,
                                    reduce, cols, nullptr, l.blocks);
    });
    LAB_CHECK(cudaDeviceSynchronize());
    std::vector<float> dh = to_float(dh_d.download()), act = to_float(act_d.download());
    for (int c = 0; c < cols; ++c) {  // the row past the outputs: still NaN
      EXPECT_TRUE(std::isnan(dh[n + c])) << "dh written past its last row, column " << c;
      EXPECT_TRUE(std::isnan(act[n + c])) << "act written past its last row, column " << c;
    }
    dh.resize(n), act.resize(n);
    EXPECT_PASSES(judge(dh, r_dh, rounded_slack(e_dh), kUb, "dh (bf16)"));
    EXPECT_PASSES(lab::compare(act, std::vector<double>(again.begin(), again.end()), lab::Tolerance::exact(),
                               "act against gelu_kernel's"));
    EXPECT_PASSES(judge(db_d.download(), r_db, e_db, 0, "db"));
  }
}

TEST(GeluProduct, DxDgeluBf16) {
  REQUIRE_SM90();
  const std::uint64_t seed = lab::testing::run_seed();
  const ProductCase cases[] = {
      {300, 768, 384, true}, {300, 768, 384, false},  // GPT-2 small's reduce; rows past two tiles
      {128, 64, 256, false},                          // whole tiles, one stage
      {37, 40, 160, true},   {37, 40, 160, false},    // a partial tile in every direction
      {1, 32, 128, false},                            // one row, half a stage
      {200, 200, 520, false},                         // reduce past three stages, not a multiple of 64
  };
  for (const ProductCase& pc : cases) {
    SCOPED_TRACE("rows " + std::to_string(pc.rows) + " reduce " + std::to_string(pc.reduce) + " cols " +
                 std::to_string(pc.cols) + (pc.positive ? " positive" : " signed"));
    run_dx_dgelu(pc, seed);
  }
}

// bias_gelu (step 22): h = X W^T + b (a sum of reduce + 1 terms through the truncating additions,
// rounded once to bf16, as products_test.cu bounds cuBLASLt's bias epilogue), and act = gelu(h) bit
// for bit gelu_kernel's on the kernel's own h; with h not kept, act alone, bit for bit the same.
void run_bias_gelu(const ProductCase& pc, std::uint64_t seed) {
  const auto [rows, reduce, cols, positive] = pc;
  lab::Rng rng(seed);
  const std::size_t n = std::size_t(rows) * cols;
  const float lo = positive ? 0.05f : -1.f;
  const auto x = bf16_values(rng, std::size_t(rows) * reduce, lo, 1.f);
  const auto w = bf16_values(rng, std::size_t(cols) * reduce, lo, 1.f);
  const auto b = bf16_values(rng, std::size_t(cols), positive ? 0.f : -4.f, 4.f);
  auto x_d = device(to_bf16(x)), w_d = device(to_bf16(w)), b_d = device(to_bf16(b));
  lab::DeviceBuffer<bf16> h_d(n + cols), act_d(n + cols), again_d(n), alone_d(n);
  ASSERT_TRUE(dgelu_product::bias_gelu_fits(x_d.data(), w_d.data(), b_d.data(), h_d.data(), act_d.data(), rows, reduce,
                                            cols));

  std::vector<double> r_h(n), e_h(n);
  for (int i = 0; i < rows; ++i)
    for (int c = 0; c < cols; ++c) {
      double sum = b[c], mag = std::fabs(b[c]);
      for (int k = 0; k < reduce; ++k) {
        const double term = double(x[std::size_t(i) * reduce + k]) * w[std::size_t(c) * reduce + k];
        sum += term, mag += std::fabs(term);
      }
      const std::size_t at = std::size_t(i) * cols + c;
      r_h[at] = sum;
      e_h[at] = (1 + kUb) * mag * (reduce + 1) * 2 * kU / (1 - (reduce + 1) * 2 * kU);
    }
  for (const Launch& l : launches(dgelu_product::kBiasGeluEpiWarps, dgelu_product::kBiasGeluDirect)) {
    SCOPED_TRACE(str(l));
    lab::poison(h_d), lab::poison(act_d), lab::poison(again_d), lab::poison(alone_d);
    auto launch = [&](bf16* h_out, bf16* act_out) {
      with_form(l, [&]<int W, bool D>() {
        dgelu_product::bias_gelu<W, D>(x_d.data(), w_d.data(), b_d.data(), h_out, act_out, rows, reduce, cols,
                                       nullptr, l.blocks);
      });
    };
    launch(h_d.data(), act_d.data());
    gelu_kernel<1><<<blocks_for(n / 4), kThreads>>>(h_d.data(), again_d.data(), n / 4);
    LAB_CHECK(cudaGetLastError());
    launch(nullptr, alone_d.data());
    LAB_CHECK(cudaDeviceSynchronize());
    std::vector<float> h = to_float(h_d.download()), act = to_float(act_d.download());
    for (int c = 0; c < cols; ++c) {  // the row past the outputs: still NaN
      EXPECT_TRUE(std::isnan(h[n + c])) << "h written past its last row, column " << c;
      EXPECT_TRUE(std::isnan(act[n + c])) << "act written past its last row, column " << c;
    }
    h.resize(n), act.resize(n);
    EXPECT_PASSES(judge(h, r_h, e_h, kUb, "h = X W^T + b (bf16)"));
    const std::vector<float> again = to_float(again_d.download()), alone = to_float(alone_d.download());
    EXPECT_PASSES(lab::compare(act, std::vector<double>(again.begin(), again.end()), lab::Tolerance::exact(),
                               "act against gelu_kernel's on the kernel's h"));
    EXPECT_PASSES(lab::compare(alone, std::vector<double>(act.begin(), act.end()), lab::Tolerance::exact(),
                               "act with h not kept against act with h"));
  }
}

TEST(GeluProduct, BiasGeluBf16) {
  REQUIRE_SM90();
  const std::uint64_t seed = lab::testing::run_seed();
  const ProductCase cases[] = {
      {300, 768, 384, true}, {300, 768, 384, false},  // GPT-2 small's reduce; rows past two tiles
      {37, 40, 160, false},                           // a partial tile in every direction
      {1, 32, 128, true},                             // one row, half a stage
      {200, 200, 520, false},                         // reduce past three stages, not a multiple of 64
  };
  for (const ProductCase& pc : cases) {
    SCOPED_TRACE("rows " + std::to_string(pc.rows) + " reduce " + std::to_string(pc.reduce) + " cols " +
                 std::to_string(pc.cols) + (pc.positive ? " positive" : " signed"));
    run_bias_gelu(pc, seed);
  }
}

// Where it does not run: a tensor off 16-byte alignment, a row of dY or W not a multiple of 16 bytes.
TEST(GeluProduct, FitsOnlyWhereTheTmaReads) {
  LAB_REQUIRE_GPU();
  lab::DeviceBuffer<bf16> a(4096), b(4096);
  EXPECT_TRUE(dgelu_product::dx_dgelu_fits(a.data(), b.data(), a.data(), b.data(), a.data(), 16, 64, 128));
  EXPECT_FALSE(dgelu_product::dx_dgelu_fits(a.data() + 4, b.data(), a.data(), b.data(), a.data(), 16, 64, 128));
  EXPECT_FALSE(dgelu_product::dx_dgelu_fits(a.data(), b.data(), a.data() + 2, b.data(), a.data(), 16, 64, 128));
  EXPECT_FALSE(dgelu_product::dx_dgelu_fits(a.data(), b.data(), a.data(), b.data(), a.data(), 16, 60, 128));
  EXPECT_FALSE(dgelu_product::dx_dgelu_fits(a.data(), b.data(), a.data(), b.data(), a.data(), 16, 64, 132));
  EXPECT_FALSE(dgelu_product::dx_dgelu_fits(a.data(), b.data(), a.data(), b.data(), a.data(), 0, 64, 128));
}

}  // namespace
