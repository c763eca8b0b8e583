// lab-arch: sm_90a
// The bf16 GPT-2 steps' Hopper attention forward in the products' layout (gpt2/fused/hopper_attention.cuh),
// held to the same kernel's forward by head, element by element:
//  - HopperRows::forward_rows (steps 9 to 18) writes O as rows, a token's heads side by side, in
//    bf16, through Softmax::write_rows's 16-byte stores (mma::store16_row);
//  - HopperQkvRows::forward_qkv_rows (step 18) also reads Q, K and V from the QKV product's rows,
//    through tensor maps over them (flashtma::rows_maps, flashtma::Fold);
//  - HopperAttention::forward, the same kernel on Q, K and V copied out by head, writes O in fp32
//    by head: the attention ladder's checks hold that output to a double reference
//    (optimized_attention_fused_overlap's check and fuzz).
// The three run one kernel with one order of operations; only where it reads its operands and how
// it stores O differ. So the rows must be O by head rounded to bf16 (to nearest, even), bit for
// bit, and the log-sum-exp the same floats: the bound here is zero, no tolerance to argue.
//
// Why here as well as in the steps' checks: a step's check must allow every bf16 rounding of a
// whole training step, and O's odd columns 1% high in the rows' stores passed step 18's check at
// all twelve of its shapes (session 68, on the H200: 0.42 of its bound at worst; the plant
// gpt2_rows_o16_1pct). Here it is some thousand elements off.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpt2/fused/hopper_attention.cuh"
#include "lab/memory.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "lab/verify.hpp"
#include "tests/kernels/kernel_testing.cuh"

namespace {

struct Case {
  int batch, heads, seq, hd;
  bool causal;
};
std::string name(const Case& c) {
  return std::to_string(c.batch) + "x" + std::to_string(c.heads) + "x" + std::to_string(c.seq) + "x" +
         std::to_string(c.hd) + (c.causal ? " causal" : "");
}

// Each output against the same kernel's by head: exact (bound zero).
lab::Verdict exactly(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  return judge(got, want, std::vector<double>(want.size(), 0.0), 0.0, what);
}

// Sequences of one to three, a length a whole number of tiles or not, both head sizes the Hopper
// kernels take; causal, as the steps run it (the policy prepares the causal kernels alone).
constexpr Case kCases[] = {{2, 3, 200, 64, true}, {1, 2, 300, 64, true}, {3, 2, 65, 128, true}, {1, 4, 1024, 64, true}};

TEST(AttentionRows, RowsAreTheForwardByHeadRounded) {
  LAB_REQUIRE_GPU();
  if (const std::string why = HopperAttention::supports(lab::current_device()); !why.empty()) GTEST_SKIP() << why;
  const std::uint64_t seed = lab::testing::run_seed();
  lab::Rng rng(seed);
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const int bh = c.batch * c.heads;
    const std::size_t dm = std::size_t(c.heads) * c.hd, tokens = std::size_t(c.batch) * c.seq,
                      head = std::size_t(c.seq) * c.hd, n = std::size_t(bh) * head;
    // Q, K and V by head (the copy steps 9 to 17 make), and the same values as the QKV product's rows.
    std::vector<std::vector<float>> by_head(3);
    for (auto& t : by_head) t = to_float(to_bf16(uniform(rng, n, -2.f, 2.f)));
    std::vector<float> qkv(tokens * 3 * dm);
    for (int b = 0; b < bh; ++b)
      for (int r = 0; r < c.seq; ++r)
        for (int col = 0; col < c.hd; ++col)
          for (int w = 0; w < 3; ++w)
            qkv[(std::size_t(b / c.heads) * c.seq + r) * 3 * dm + w * dm + std::size_t(b % c.heads) * c.hd + col] =
                by_head[w][std::size_t(b) * head + std::size_t(r) * c.hd + col];
    auto q = device(to_bf16(by_head[0])), k = device(to_bf16(by_head[1])), v = device(to_bf16(by_head[2]));
    auto qkv_d = device(to_bf16(qkv));
    lab::DeviceBuffer<float> o(n), lse(std::size_t(bh) * c.seq), lse_rows(lse.size()), lse_qkv(lse.size());
    lab::DeviceBuffer<bf16> rows(tokens * dm), rows_qkv(tokens * dm);
    for (auto* b : {&o, &lse, &lse_rows, &lse_qkv}) lab::poison(*b);
    lab::poison(rows), lab::poison(rows_qkv);

    const gpt2::Config config{.layers = 1, .d = int(dm), .heads = c.heads, .context = c.seq, .batch = c.batch};
    HopperQkvRows attention(config, gpt2::Phase::forward);
    const float scale = 1.f / std::sqrt(float(c.hd));
    attention.forward(q.data(), k.data(), v.data(), o.data(), lse.data(), bh, c.seq, c.hd, c.causal, scale, nullptr);
    attention.forward_rows(q.data(), k.data(), v.data(), rows.data(), lse_rows.data(), c.batch, c.heads, c.seq, c.hd,
                           c.hd, c.causal, scale, nullptr);
    attention.forward_qkv_rows(qkv_d.data(), rows_qkv.data(), lse_qkv.data(), c.batch, c.heads, c.seq, c.hd, c.causal,
                               scale, nullptr);
    LAB_CHECK(cudaDeviceSynchronize());

    // O by head, rounded to bf16 and laid out as rows: what both row forms must have written.
    const std::vector<float> by = o.download();
    std::vector<double> want(tokens * dm);
    for (int b = 0; b < bh; ++b)
      for (int r = 0; r < c.seq; ++r)
        for (int col = 0; col < c.hd; ++col)
          want[(std::size_t(b / c.heads) * c.seq + r) * dm + std::size_t(b % c.heads) * c.hd + col] =
              round_bf16(by[std::size_t(b) * head + std::size_t(r) * c.hd + col]);
    const std::vector<float> lse_by = lse.download();
    const std::vector<double> lse_want(lse_by.begin(), lse_by.end());
    for (float x : lse_by) ASSERT_TRUE(std::isfinite(x)) << "the forward by head left a log-sum-exp unwritten";
    EXPECT_PASSES(exactly(to_float(rows.download()), want, "O rows (forward_rows)"));
    EXPECT_PASSES(exactly(lse_rows.download(), lse_want, "lse (forward_rows)"));
    EXPECT_PASSES(exactly(to_float(rows_qkv.download()), want, "O rows (forward_qkv_rows)"));
    EXPECT_PASSES(exactly(lse_qkv.download(), lse_want, "lse (forward_qkv_rows)"));
  }
}

}  // namespace
