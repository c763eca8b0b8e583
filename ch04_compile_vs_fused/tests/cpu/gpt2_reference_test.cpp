// The GPT-2 model's definition and reference (CPU only): parameter counts equal PyTorch's, the
// double reference's gradients equal the loss's central differences, the fp32 computation of the
// same formulas stays inside the Bounded slack that the GPU checks use, and that slack still
// rejects planted mistakes. Also the loss curves' comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpt2/gpt2.cuh"
#include "gpt2/gpt2_model.hpp"
#include "lab/rng.hpp"
#include "lab/testing.hpp"
#include "lab/verify.hpp"

namespace {

using gpt2::Config;
using gpt2::Phase;

// The counts, which PyTorch's sum(p.numel()) gives for the same model, in millions.
TEST(Gpt2Model, ParameterCountsArePyTorchs) {
  const std::pair<const char*, double> expected[] = {
      {"small", 101.2}, {"medium", 323.8}, {"large", 735.3}, {"xl", 1509.2}, {"2.7B", 2571.5}};
  for (const auto& [name, millions] : expected) {
    const gpt2::NamedSize* size = nullptr;
    for (const auto& s : gpt2::kSizes)
      if (std::string(s.name) == name) size = &s;
    ASSERT_NE(size, nullptr) << name;
    const Config c{size->layers, size->d, size->heads, 1024, gpt2::kBatch, gpt2::kVocab};
    EXPECT_EQ(std::round(double(gpt2::param_count(c)) / 1e5) / 10, millions) << name;
  }
}

TEST(Gpt2Model, LayoutIsContiguousAndCountsEveryParameter) {
  const Config c{3, 48, 6, 20, 2, 51};
  const auto t = gpt2::layout(c);
  ASSERT_EQ(t.size(), 2 + 12 * 3 + 3u);
  std::size_t at = 0;
  for (const auto& x : t) {
    EXPECT_EQ(x.offset, at) << x.name;
    std::size_t n = 1;
    for (auto s : x.shape) n *= std::size_t(s);
    EXPECT_EQ(x.size, n) << x.name;
    at += x.size;
  }
  EXPECT_EQ(at, gpt2::param_count(c));
  const gpt2::Offsets o = gpt2::offsets(c);
  EXPECT_EQ(o.blocks[1].qkv_w, t[2 + 12 + 2].offset);
  EXPECT_EQ(t[2 + 12 + 2].name, "blocks.1.attn.qkv.weight");
  EXPECT_EQ(o.head, t.back().offset);
}

// plan_saved's promise: a stage's saved tensors in the gradients' buffer lie wholly below the
// stage's own first parameter (the backward writes nothing there until the stage is done with
// them), no two stages overlap in either buffer, and every stage is placed once. With sizes as the
// fused step's (15 B T d floats a block; the head's 2 B T d and the B T x V logits): at xl and
// context 256 only block 0 spills (its 98 MB exceeds the embeddings' gradients), at 2.7B and
// context 128 nothing does, and at the small model's context 1024 most blocks do.
TEST(Gpt2Model, SavedTensorsBorrowOnlyGradientsNotYetWritten) {
  auto plan_for = [](const Config& c) {
    const std::size_t rows = c.tokens();
    std::vector<std::size_t> floats(c.layers + 1, 15 * rows * c.d);
    floats.back() = rows * (2 * c.d + c.vocab);
    const gpt2::SavedPlan plan = gpt2::plan_saved(c, floats);
    EXPECT_EQ(plan.stages.size(), floats.size());
    std::vector<std::pair<std::size_t, std::size_t>> grads, spill;  // [begin, end)
    std::size_t spilled = 0, in_grads = 0;
    for (int s = 0; s <= c.layers; ++s) {
      const gpt2::SavedPlace& at = plan.stages[s];
      (at.in_grads ? grads : spill).push_back({at.offset, at.offset + floats[s]});
      if (at.in_grads) {
        EXPECT_LE(at.offset + floats[s], gpt2::stage_begin(c, s)) << "stage " << s;
        in_grads += floats[s];
      } else {
        EXPECT_LE(at.offset + floats[s], plan.spill) << "stage " << s;
        spilled += floats[s];
      }
    }
    for (auto* placed : {&grads, &spill}) {
      std::sort(placed->begin(), placed->end());
      for (std::size_t i = 1; i < placed->size(); ++i) EXPECT_LE((*placed)[i - 1].second, (*placed)[i].first);
    }
    EXPECT_EQ(spilled, plan.spill);
    EXPECT_EQ(in_grads, plan.grads_used);
    EXPECT_LE(plan.grads_used, gpt2::param_count(c));
    return plan;
  };
  const gpt2::SavedPlan xl = plan_for({48, 1600, 25, 256, 4, 10000});
  EXPECT_FALSE(xl.stages[0].in_grads);
  for (int s = 1; s <= 48; ++s) EXPECT_TRUE(xl.stages[s].in_grads) << "stage " << s;
  EXPECT_EQ(plan_for({32, 2560, 32, 128, 4, 10000}).spill, 0u);
  const gpt2::SavedPlan small = plan_for({12, 768, 12, 1024, 4, 10000});
  EXPECT_GT(small.spill, 10 * 15 * std::size_t(4096) * 768);
  for (const Config& c : {Config{2, 64, 4, 16, 2, 97}, Config{1, 128, 2, 100, 1, 61}, Config{3, 48, 6, 20, 2, 51}})
    plan_for(c);
  EXPECT_THROW(gpt2::plan_saved(Config{}, std::vector<std::size_t>(2, 1)), std::invalid_argument);
}

// plan_forward_saved's promise: the head's kept part (the final LayerNorm's outputs, read by the
// head's product) is overlapped by neither the block's tensors nor the head's late part (its
// weights' copy and logits, made after the block is done), the late part may lie over the block's,
// and the buffer is no larger than that needs. Sizes in floats, as the bf16 steps' forward alone
// has them: block larger than the late part (GPT-2 small, context 1024, vocabulary 10000, about
// 25.6M against 9M), and smaller (one tiny block and 16386 classes, which the fuzz found: the late
// part, carved from the buffer's start, overwrote the LayerNorm's outputs).
TEST(Gpt2Model, ForwardSavedKeepsTheHeadsInputApart) {
  auto apart = [](std::size_t a, std::size_t n, std::size_t b, std::size_t m) { return a + n <= b || b + m <= a; };
  for (const auto& [block, kept, late] : {std::array<std::size_t, 3>{25'600'000, 6'300'000, 9'000'000},
                                          {8'576, 512, 276'544}, {64, 64, 64}, {0, 64, 128}, {128, 0, 64}}) {
    const gpt2::ForwardSaved at = gpt2::plan_forward_saved(block, kept, late);
    EXPECT_TRUE(apart(at.kept, kept, at.block, block)) << block << " " << kept << " " << late;
    EXPECT_TRUE(apart(at.kept, kept, at.late, late)) << block << " " << kept << " " << late;
    EXPECT_LE(at.kept + kept, at.floats);
    EXPECT_LE(at.block + block, at.floats);
    EXPECT_LE(at.late + late, at.floats);
    EXPECT_EQ(at.floats, kept + std::max(block, late));  // the late part over the block's, not beside it
  }
}

TEST(Gpt2Model, ConfigRejectsWhatTheModelCannotBe) {
  EXPECT_NE((Config{2, 64, 3, 16, 2, 97}).invalid(), "");  // 64 does not split into 3 heads
  EXPECT_NE((Config{2, 64, 4, 1025, 2, 97}).invalid(), "");  // past the position table
  EXPECT_EQ((Config{2, 64, 4, 1024, 1, 97}).invalid(), "");
}

// A model's parameters, data and optimizer state drawn as the Problem draws them.
struct Case {
  Config c;
  std::vector<float> params, m, v;
  std::vector<std::int32_t> tokens, targets;
  explicit Case(Config cfg, std::uint64_t seed) : c(cfg) {
    lab::Rng rng(seed);
    params.resize(gpt2::param_count(c));
    for (const auto& t : gpt2::layout(c)) {
      const auto r = gpt2::init_rule(c, t);
      std::span<float> part(params.data() + t.offset, t.size);
      if (r.draw == gpt2::InitRule::Draw::normal)
        rng.normal(part, r.center, r.spread);
      else
        rng.uniform(part, r.center - r.spread, r.center + r.spread);
    }
    tokens.resize(c.tokens()), targets.resize(c.tokens());
    rng.integers(tokens, 0, c.vocab);  // [0, vocab), as the Problem draws them
    rng.integers(targets, 0, c.vocab);
    // Moments as after a few steps: m about the size of a gradient, v about its square.
    m.resize(params.size()), v.resize(params.size());
    rng.uniform(m, -1e-3f, 1e-3f);
    rng.uniform(v, 1e-8f, 1e-6f);
  }
  gpt2::OptimizerState opt(int step) const { return {m, v, step}; }
  template <class T>
  gpt2::Outputs<T> run(Phase phase, int step = 3, const gpt2::ModelOptions& o = {}) const {
    return gpt2::reference<T>(c, phase, params, tokens, targets, opt(step), {}, o);
  }
};

const Config kTiny{2, 64, 4, 16, 2, 97};

// The double reference's gradients against central differences of its loss, extrapolated by
// Richardson's step, with the differences' own truncation error (|D(h) - D(h/2)|, which bounds the
// extrapolation's) and the loss's rounding over the step as the tolerance. A few elements of every
// tensor, a present token's row of wte and positions inside the context included.
TEST(Gpt2Reference, GradientsMatchCentralDifferences) {
  Case k(kTiny, lab::testing::run_seed());
  // h small beside the weights (0.01 to 1): differences at h near 1e-4 were seen to wander by
  // 1e-6 of the gradient (the loss is smooth only to about 1e-12 of itself at that scale),
  // those at 2^-14 and below to converge on the reference.
  const float h = 0x1p-16f;
  struct Pick {
    std::string name;
    std::size_t element, index;  // in its tensor, in the flat buffer
  };
  std::vector<Pick> picks;
  for (const auto& t : gpt2::layout(k.c)) {
    std::vector<std::size_t> at = {t.offset, t.offset + t.size / 2, t.offset + t.size - 1};
    if (t.name == "wte.weight") at = {t.offset + std::size_t(k.tokens[0]) * k.c.d + 5};
    if (t.name == "wpe.weight") at = {t.offset + 3, t.offset + std::size_t(k.c.context - 1) * k.c.d + 7};
    for (std::size_t i : at) picks.push_back({t.name, i - t.offset, i});
  }
  // The steps must be the ones taken: p0 +- h rounds in fp32 wherever p0 has bits below the ulp
  // of p0 + h (p0 just under a power of two, say 0.0311 + 2^-16 > 2^-5: an error of 2^-29 in a step
  // of 2^-16, 1e-4 of the difference; a seed hit it). A picked weight snapped to a multiple of
  // 2^-18 (|p0| < 2^6 here) makes p0 +- h and p0 +- h/2 exact.
  for (const auto& pick : picks) {
    float& p = k.params[pick.index];
    ASSERT_LT(std::fabs(p), 0x1p6f) << pick.name;
    p = std::ldexp(std::nearbyint(std::ldexp(p, 18)), -18);
  }
  const auto ref = k.run<double>(Phase::forward_backward);
  auto loss_at = [&](std::size_t i, float value) {
    std::vector<float> p = k.params;
    p[i] = value;
    return gpt2::reference<double>(k.c, Phase::forward, p, k.tokens, k.targets).loss;
  };
  int checked = 0;
  for (const auto& [name, j, i] : picks) {
    const float p0 = k.params[i];
    auto diff = [&](float step) {
      const float up = p0 + step, down = p0 - step;
      EXPECT_EQ(double(up) - double(down), 2.0 * step) << name << ": the step rounded";
      return (loss_at(i, up) - loss_at(i, down)) / (2.0 * step);
    };
    const double d1 = diff(h), d2 = diff(h / 2);
    const double estimate = (4 * d2 - d1) / 3, truncation = std::fabs(d2 - d1);
    // The loss's own rounding in double (64 eps |L|: the differences showed about 1 eps) over h.
    const double rounding = 64 * 0x1p-52 * std::fabs(ref.loss) / (h / 2);
    EXPECT_NEAR(ref.grads[i], estimate, truncation + rounding) << name << " element " << j;
    ++checked;
  }
  EXPECT_GT(checked, 3 * 12 * kTiny.layers);
  // Positions past the context and tokens absent from the batch have no gradient at all.
  const auto o = gpt2::offsets(k.c);
  EXPECT_EQ(ref.grads[o.wpe + std::size_t(k.c.context) * k.c.d], 0.0);
}

lab::Verdict judge(const Case& k, const gpt2::Expected& e, const gpt2::Outputs<float>& got) {
  return gpt2::judge(e, k.c, got.loss, got.grads, got.params, got.m, got.v);
}

// The same formulas evaluated in fp32 (sequential sums: another order than any GPU kernel's) pass
// the check the GPU variants face, at every check shape of the topic (the tiny configuration, head
// sizes 16 to 128, one head, contexts off every tile, batch 1), each in every phase.
TEST(Gpt2Reference, Fp32PassesTheCheck) {
  for (const lab::Shape& s : Gpt2Step::checks())
    for (const Phase phase : {Phase::forward, Phase::forward_backward, Phase::step}) {
      const Config c = gpt2::config_of(s);
      Case k(c, lab::testing::run_seed());
      const auto e = gpt2::expected(k.c, phase, k.params, k.tokens, k.targets, k.opt(3));
      const lab::Verdict v = judge(k, e, k.run<float>(phase));
      EXPECT_TRUE(v.pass) << "L" << c.layers << " d" << c.d << " h" << c.heads << " T" << c.context << " "
                          << gpt2::phase_name(phase) << ": " << v.details();
    }
}

// The Monte Carlo runs are independent. Their streams never overlap: between the starts of any two
// of 16 runs at three seeds lie at least 2^40 draws (a run draws about 10^8 at the largest check
// shape). And at the element where the runs' streams, once shifted copies of one another, agreed to
// 1/17 of the true spread (grads wte.weight[1687] at L1 d128 h1 T13, inputs from seed
// 18107492607501), 8 runs at the default seed and 64 pooled from four other seeds give about the same
// sigma: independent, the square of their ratio is F(8, 64)-distributed, and the ratio falls below
// 0.2 with probability 3e-5 and above 2.5 with 6e-6.
TEST(Gpt2Reference, MonteCarloRunsAreIndependent) {
  // gamma's inverse mod 2^64 by Newton's iteration (x <- x (2 - gamma x) doubles the correct bits).
  const std::uint64_t gamma = 0x9e3779b97f4a7c15ull;
  std::uint64_t inverse = gamma;
  for (int i = 0; i < 6; ++i) inverse *= 2 - gamma * inverse;
  ASSERT_EQ(gamma * inverse, 1u);
  std::vector<std::uint64_t> starts;
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    for (int r = 0; r < gpt2::kMonteCarloRuns; ++r) starts.push_back(gpt2::mc_stream_start(seed, r));
  for (std::size_t a = 0; a < starts.size(); ++a)
    for (std::size_t b = a + 1; b < starts.size(); ++b) {
      const std::uint64_t draws = (starts[b] - starts[a]) * inverse;  // from a's start to b's
      EXPECT_GE(std::min(draws, 0 - draws), std::uint64_t(1) << 40) << "streams " << a << " and " << b;
    }

  const Config c{1, 128, 1, 13, 1, 50};
  Case k(c, 18107492607501ull);
  const std::size_t i = gpt2::offsets(c).wte + 1687;
  auto sigma = [&](int runs, std::uint64_t seed) {
    return gpt2::expected(k.c, Phase::forward_backward, k.params, k.tokens, k.targets, k.opt(3), {}, {}, runs, seed)
        .sigma.grads[i];
  };
  const double eight = sigma(8, 1);
  double pooled = 0;
  for (std::uint64_t seed = 2; seed <= 5; ++seed) pooled += std::pow(sigma(16, seed), 2) / 4;
  pooled = std::sqrt(pooled);
  ASSERT_GT(pooled, 0);
  EXPECT_GT(eight / pooled, 0.2) << eight << " against " << pooled;
  EXPECT_LT(eight / pooled, 2.5) << eight << " against " << pooled;
}

// The 3xTF32 variant's check, both ways: the fp32 stand-in multiplying as that variant does (the
// operands split into tf32 parts, three sums of products added) passes the check for the precision
// it declares, on every check shape; plain TF32 (each operand rounded to tf32: 2^-11 of it lost,
// what the "fp32 accuracy" rules out) fails it, as it fails fp32's.
TEST(Gpt2Reference, Tf32x3PassesItsCheckAndTf32FailsIt) {
  const auto rounding = gpt2::ModelOptions::for_precision("3xtf32");
  gpt2::ModelOptions split = rounding, tf32 = rounding;
  split.products = gpt2::ModelOptions::Products::tf32x3;
  tf32.products = gpt2::ModelOptions::Products::tf32;
  for (const lab::Shape& s : Gpt2Step::checks()) {
    const Config c = gpt2::config_of(s);
    Case k(c, lab::testing::run_seed());
    const auto e = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, rounding);
    const lab::Verdict v = judge(k, e, k.run<float>(Phase::step, 3, split));
    EXPECT_TRUE(v.pass) << "L" << c.layers << " d" << c.d << " h" << c.heads << " T" << c.context << ": "
                        << v.details();
    EXPECT_FALSE(judge(k, e, k.run<float>(Phase::step, 3, tf32)).pass)
        << "L" << c.layers << " d" << c.d << ": plain TF32 passed the 3xTF32 check";
  }
  EXPECT_THROW(gpt2::ModelOptions::for_precision("fp16"), std::invalid_argument);
  EXPECT_EQ(gpt2::ModelOptions::for_precision("fp32").product_error, 0);
}

// The bf16 check, both ways, on every check shape: the fp32 stand-in with each linear layer's
// operands rounded to bf16 (what the bf16 variants' products do) passes the check of the precision
// they declare, and fails fp32's (the widening is needed); operands rounded to e4m3's 4 bits (16
// times bf16's error) fail the bf16 check (it is not so wide that anything passes).
TEST(Gpt2Reference, Bf16PassesItsCheckAndFourBitsFailIt) {
  const auto rounding = gpt2::ModelOptions::for_precision("bf16+bf16-attention");
  EXPECT_EQ(rounding.operand_error, 65536);
  EXPECT_EQ(rounding.product_error, 0);
  EXPECT_EQ(rounding.attention_operand_error, 65536);
  EXPECT_FALSE(rounding.head_in_fp32);
  EXPECT_TRUE(rounding.hidden_in_bf16);
  gpt2::ModelOptions bf16 = rounding, four = rounding;
  bf16.products = gpt2::ModelOptions::Products::bf16;
  four.products = gpt2::ModelOptions::Products::e4m3;
  const auto fp32 = gpt2::ModelOptions::for_precision("fp32");
  for (const lab::Shape& s : Gpt2Step::checks()) {
    const Config c = gpt2::config_of(s);
    Case k(c, lab::testing::run_seed());
    const auto e = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, rounding);
    const auto mine = k.run<float>(Phase::step, 3, bf16);
    const lab::Verdict v = judge(k, e, mine);
    EXPECT_TRUE(v.pass) << "L" << c.layers << " d" << c.d << " h" << c.heads << " T" << c.context << ": "
                        << v.details();
    const auto e32 = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, fp32);
    EXPECT_FALSE(judge(k, e32, mine).pass) << "L" << c.layers << " d" << c.d << ": bf16 passed the fp32 check";
    EXPECT_FALSE(judge(k, e, k.run<float>(Phase::step, 3, four)).pass)
        << "L" << c.layers << " d" << c.d << ": 4-bit operands passed the bf16 check";
  }
}

// The MLP's pre-activation kept in bf16 (ModelOptions::hidden_in_bf16), alone on fp32 products so
// that its rounding is the only one beyond fp32's: the fp32 stand-in that rounds h passes the
// check whose Monte Carlo runs perturb h, and fails the plain fp32 check (the runs do carry it);
// the double reference does not move. (Beside bf16 products, Bf16PassesItsCheckAndFourBitsFailIt
// covers it: the bf16 stand-in rounds h too.)
TEST(Gpt2Reference, HiddenInBf16IsModelledBothWays) {
  const auto fp32 = gpt2::ModelOptions::for_precision("fp32");
  EXPECT_FALSE(fp32.hidden_in_bf16);
  gpt2::ModelOptions hidden = fp32;
  hidden.hidden_in_bf16 = true;
  for (const lab::Shape& s : Gpt2Step::checks()) {
    const Config c = gpt2::config_of(s);
    Case k(c, lab::testing::run_seed());
    const auto mine = k.run<float>(Phase::step, 3, hidden);
    const auto e = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, hidden);
    const lab::Verdict v = judge(k, e, mine);
    EXPECT_TRUE(v.pass) << "L" << c.layers << " d" << c.d << " h" << c.heads << " T" << c.context << ": "
                        << v.details();
    const auto e32 = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, fp32);
    EXPECT_EQ(e.ref.grads, e32.ref.grads) << "the rounding model changed the double reference";
    EXPECT_FALSE(judge(k, e32, mine).pass) << "L" << c.layers << " d" << c.d << " h" << c.heads << " T"
                                           << c.context << ": h rounded to bf16 passed the fp32 check";
  }
}

// A rounding a bf16 step adds to the model, both ways on every check shape: `alone` is fp32's model
// with that rounding alone, so that it is the only one beyond fp32's; the fp32 stand-in that makes
// it passes the check whose Monte Carlo runs perturb it, and fails the plain fp32 check (`what`
// names it there); the double reference does not move. `declared` is the step's whole model: the
// stand-in with bf16 products and every rounding it names passes it.
void expect_modelled_both_ways(const gpt2::ModelOptions& alone, const gpt2::ModelOptions& declared,
                               const std::string& what) {
  const auto fp32 = gpt2::ModelOptions::for_precision("fp32");
  gpt2::ModelOptions bf16 = declared;
  bf16.products = gpt2::ModelOptions::Products::bf16;
  for (const lab::Shape& s : Gpt2Step::checks()) {
    const Config c = gpt2::config_of(s);
    Case k(c, lab::testing::run_seed());
    std::ostringstream where;
    where << "L" << c.layers << " d" << c.d << " h" << c.heads << " T" << c.context;
    const std::string at = where.str();
    const auto mine = k.run<float>(Phase::step, 3, alone);
    const auto e = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, alone);
    const lab::Verdict v = judge(k, e, mine);
    EXPECT_TRUE(v.pass) << at << ": " << v.details();
    const auto e32 = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, fp32);
    EXPECT_EQ(e.ref.grads, e32.ref.grads) << "the rounding model changed the double reference";
    EXPECT_FALSE(judge(k, e32, mine).pass) << at << ": " << what << " passed the fp32 check";
    const auto e16 = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, declared);
    const lab::Verdict v16 = judge(k, e16, k.run<float>(Phase::step, 3, bf16));
    EXPECT_TRUE(v16.pass) << at << ": " << v16.details();
  }
}

// A rounding that one bf16 step adds (`flag`, set by the step's precision `step` and not by the
// precision of the step before it, `before`): the step's whole model keeps every earlier bf16
// rounding, and the rounding alone is modelled both ways (expect_modelled_both_ways).
void expect_step_rounding(bool gpt2::ModelOptions::*flag, const std::string& step, const std::string& before,
                          const std::string& what) {
  const auto fp32 = gpt2::ModelOptions::for_precision("fp32");
  EXPECT_FALSE(fp32.*flag);
  EXPECT_FALSE(gpt2::ModelOptions::for_precision(before).*flag);
  const auto declared = gpt2::ModelOptions::for_precision(step + "+bf16-attention");
  EXPECT_TRUE(declared.*flag);
  EXPECT_TRUE(declared.hidden_in_bf16);
  EXPECT_EQ(declared.operand_error, 65536);
  const auto previous = gpt2::ModelOptions::for_precision(before);
  for (bool gpt2::ModelOptions::*earlier : {&gpt2::ModelOptions::epilogue_bias_in_bf16,
                                            &gpt2::ModelOptions::mlp_grad_in_bf16,
                                            &gpt2::ModelOptions::logits_in_bf16})
    if (previous.*earlier) {
      EXPECT_TRUE(declared.*earlier) << what << ": an earlier step's rounding dropped";
    }
  gpt2::ModelOptions alone = fp32;
  alone.*flag = true;
  expect_modelled_both_ways(alone, declared, what);
}

// The QKV and MLP-first biases kept in bf16 (ModelOptions::epilogue_bias_in_bf16, the precision
// "bf16-epilogue-bias" of the step that adds them in cuBLASLt's epilogue).
TEST(Gpt2Reference, EpilogueBiasInBf16IsModelledBothWays) {
  expect_step_rounding(&gpt2::ModelOptions::epilogue_bias_in_bf16, "bf16-epilogue-bias", "bf16",
                       "the biases rounded to bf16");
}

// GELU's output gradient kept in bf16 (ModelOptions::mlp_grad_in_bf16, the precision
// "bf16-epilogue-bias-dact" of the step whose MLP's second product writes it so).
TEST(Gpt2Reference, MlpGradInBf16IsModelledBothWays) {
  EXPECT_THROW(gpt2::ModelOptions::for_precision("bf16-dact"), std::invalid_argument);
  expect_step_rounding(&gpt2::ModelOptions::mlp_grad_in_bf16, "bf16-epilogue-bias-dact", "bf16-epilogue-bias",
                       "GELU's output gradient in bf16");
}

// AdamW's second moment holds the gradient's square: at a gradient near zero beside its spread the
// runs' v moves by about (1 - beta2) sigma_g^2, a correct kernel's by up to k^2 times that, beyond
// the k sigma_v of a linear spread; Expected::curvature adds the square's part. The inputs on which
// CI saw the bf16 stand-in of the MLP-gradient step fail (seed 189479420771972, v of
// blocks.0.mlp.proj.weight, 2026-11-27) pass with it, fail without it, and fail with that element
// of v 1% off.
TEST(Gpt2Reference, SecondMomentsBoundBendsWithTheGradientsSquare) {
  const Config c = gpt2::config_of({1, 128, 1, 13, 1, 50, 3});
  const Case k(c, 189479420771972ull);
  const auto declared = gpt2::ModelOptions::for_precision("bf16-epilogue-bias-dact+bf16-attention");
  gpt2::ModelOptions bf16 = declared;
  bf16.products = gpt2::ModelOptions::Products::bf16;
  const auto e = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, declared);
  const auto mine = k.run<float>(Phase::step, 3, bf16);
  const lab::Verdict v = judge(k, e, mine);
  EXPECT_TRUE(v.pass) << v.details();
  // The element of v furthest beyond k sigma_v: its gradient within its own bound and near zero
  // beside it, its curvature (1 - beta2) (k sigma_g)^2.
  const double kk = gpt2::element_k(e.runs), one_b2 = 1 - gpt2::AdamW{}.beta2;
  std::size_t worst = 0;
  double share = 0;
  for (std::size_t i = 0; i < mine.v.size(); ++i)
    if (const double s = std::fabs(mine.v[i] - e.ref.v[i]) / (kk * e.sigma.v[i]); s > share) share = s, worst = i;
  ASSERT_GT(share, 1) << "no element of v beyond k sigma_v: the case this test keeps is gone";
  const double a = kk * e.sigma.grads[worst];
  EXPECT_LE(std::fabs(mine.grads[worst] - e.ref.grads[worst]), a);
  EXPECT_LT(std::fabs(e.ref.grads[worst]), a);
  EXPECT_NEAR(e.curvature.v[worst], one_b2 * a * a, 1e-9 * one_b2 * a * a);
  gpt2::Expected linear = e;
  linear.curvature = {};
  EXPECT_FALSE(judge(k, linear, mine).pass) << "passed without the curvature: the case is gone";
  auto off = mine;
  off.v[worst] *= 1.01f;
  EXPECT_FALSE(judge(k, e, off).pass) << "v 1% off passed at element " << worst;
}

// The logits kept in bf16 (ModelOptions::logits_in_bf16, the precision
// "bf16-epilogue-bias-dact-logits" of the step whose head writes them so).
TEST(Gpt2Reference, LogitsInBf16IsModelledBothWays) {
  EXPECT_THROW(gpt2::ModelOptions::for_precision("bf16-logits"), std::invalid_argument);
  expect_step_rounding(&gpt2::ModelOptions::logits_in_bf16, "bf16-epilogue-bias-dact-logits",
                       "bf16-epilogue-bias-dact", "the logits in bf16");
}

// The LayerNorms' output gradients kept in bf16 (ModelOptions::ln_grad_in_bf16, the precision
// "bf16-epilogue-bias-dact-logits-dln" of the step whose products before the LayerNorms' backward
// write their input gradients so).
TEST(Gpt2Reference, LnGradInBf16IsModelledBothWays) {
  EXPECT_THROW(gpt2::ModelOptions::for_precision("bf16-dln"), std::invalid_argument);
  EXPECT_THROW(gpt2::ModelOptions::for_precision("bf16-epilogue-bias-dact-dln"), std::invalid_argument);
  expect_step_rounding(&gpt2::ModelOptions::ln_grad_in_bf16, "bf16-epilogue-bias-dact-logits-dln",
                       "bf16-epilogue-bias-dact-logits", "the LayerNorms' output gradients in bf16");
}

// "+3xtf32-attention" (the step whose attention runs on the tensor cores) adds the attention's
// rounding to either product model and nothing else, and the Monte Carlo runs carry it: the spread
// of the QKV weight's gradient grows (12u a product against fp32's 1u), and the double reference
// itself does not move.
TEST(Gpt2Reference, AttentionRoundingWidensTheAttentionsSpread) {
  const auto fp32 = gpt2::ModelOptions::for_precision("fp32");
  const auto attention = gpt2::ModelOptions::for_precision("fp32+3xtf32-attention");
  EXPECT_EQ(attention.product_error, 0);
  EXPECT_EQ(attention.attention_product_error, 12);
  EXPECT_EQ(attention.attention_sum_error, 1);
  EXPECT_EQ(fp32.attention_product_error, 0);
  const auto both = gpt2::ModelOptions::for_precision("3xtf32+3xtf32-attention");
  EXPECT_EQ(both.product_error, 12);
  EXPECT_EQ(both.attention_product_error, 12);
  EXPECT_THROW(gpt2::ModelOptions::for_precision("fp32+fp16-attention"), std::invalid_argument);

  const Config c{1, 32, 2, 9, 1, 17};
  Case k(c, 20261123ull);
  const auto run = [&](const gpt2::ModelOptions& o) {
    return gpt2::expected(k.c, Phase::forward_backward, k.params, k.tokens, k.targets, k.opt(3), {}, o);
  };
  const gpt2::Expected plain = run(fp32), widened = run(attention);
  EXPECT_EQ(plain.ref.grads, widened.ref.grads) << "the rounding model changed the double reference";
  const gpt2::Offsets off = gpt2::offsets(c);
  const std::size_t begin = off.blocks[0].qkv_w, end = begin + 3 * 32 * 32;
  double plain_ss = 0, widened_ss = 0;  // over the QKV weight's gradient
  for (std::size_t i = begin; i < end; ++i)
    plain_ss += std::pow(plain.sigma.grads[i], 2), widened_ss += std::pow(widened.sigma.grads[i], 2);
  // At this seed the spread's norm grows 1.45 times (the rest of the model's rounding stays).
  EXPECT_GT(std::sqrt(widened_ss), 1.2 * std::sqrt(plain_ss)) << "the attention's 12u did not reach the runs";
}

// The check is not so wide that mistakes pass: a tanh GELU in an erf model, Adam's L2 penalty in
// place of AdamW's decoupled decay, and any one tensor's gradient off by 0.1% are all rejected.
TEST(Gpt2Reference, CheckRejectsPlantedMistakes) {
  Case k(kTiny, lab::testing::run_seed());
  const auto e = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3));
  gpt2::ModelOptions tanh_gelu;
  tanh_gelu.gelu = gpt2::ModelOptions::Gelu::tanh;
  EXPECT_FALSE(judge(k, e, k.run<float>(Phase::step, 3, tanh_gelu)).pass) << "tanh GELU passed";
  gpt2::ModelOptions adam_l2;
  adam_l2.decoupled_weight_decay = false;
  EXPECT_FALSE(judge(k, e, k.run<float>(Phase::step, 3, adam_l2)).pass) << "Adam with L2 passed";

  const auto good = k.run<float>(Phase::step);
  ASSERT_TRUE(judge(k, e, good).pass);
  for (const auto& t : gpt2::layout(k.c)) {
    auto bad = good;
    for (std::size_t i = t.offset; i < t.offset + t.size; ++i) bad.grads[i] *= 1.001f;
    const auto verdict = judge(k, e, bad);
    EXPECT_FALSE(verdict.pass) << t.name << ": a 0.1% error in its gradient passed";
    // The failure is named for the tensor, not for the hundreds of outputs judged, and its figures
    // are the tensor's own: its element count and its largest error, not every output's.
    EXPECT_EQ(verdict.what, "grads " + t.name);
    EXPECT_NE(verdict.reason.find("1 of "), std::string::npos) << verdict.reason;
    EXPECT_EQ(verdict.count, t.size) << t.name;
    double max_abs = 0;
    for (std::size_t i = t.offset; i < t.offset + t.size; ++i)
      max_abs = std::max(max_abs, std::fabs(double(bad.grads[i]) - e.ref.grads[i]));
    EXPECT_EQ(verdict.max_abs, max_abs) << t.name;
  }
  EXPECT_EQ(judge(k, e, good).what.rfind("loss, grads, params, m, v (", 0), 0u) << judge(k, e, good).what;
  auto bad_loss = good;
  bad_loss.loss *= 1.0001f;
  EXPECT_FALSE(judge(k, e, bad_loss).pass) << "a 0.01% error in the loss passed";
}

// The L2 test's margin as the verdict's note states it ("the L2 test: at most R of 4 x ... (NAME)"),
// R and NAME from the note's text (-1 where it has none).
std::pair<double, std::string> l2_margin(const lab::Verdict& v) {
  const std::string key = "the L2 test: at most ";
  const std::size_t at = v.note.find(key);
  if (at == std::string::npos) return {-1, ""};
  const std::size_t open = v.note.find('(', at), close = v.note.find(')', open);
  return {std::strtod(v.note.c_str() + at + key.size(), nullptr), v.note.substr(open + 1, close - open - 1)};
}

// The same margin computed here: over every tensor of the four outputs that the L2 test takes (its
// runs' spread of kL2MinDof degrees of freedom), the L2 error over kL2Factor x the runs' largest.
std::pair<double, std::string> l2_margin_of(const Case& k, const gpt2::Expected& e, const gpt2::Outputs<float>& got) {
  std::pair<double, std::string> worst{-1, ""};
  const auto tensors = gpt2::layout(k.c);
  auto each = [&](const char* name, const std::vector<float>& g, const std::vector<double>& ref,
                  const std::vector<double>& sigma, const std::vector<double>& l2) {
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const auto& x = tensors[t];
      if (gpt2::l2_dof(std::span<const double>(sigma.data() + x.offset, x.size)) < gpt2::kL2MinDof) continue;
      double sq = 0;
      for (std::size_t i = x.offset; i < x.offset + x.size; ++i) sq += (double(g[i]) - ref[i]) * (double(g[i]) - ref[i]);
      const double ratio = std::sqrt(sq) / (gpt2::kL2Factor * l2[t]);
      if (ratio > worst.first) worst = {ratio, std::string(name) + " " + x.name};
    }
  };
  each("grads", got.grads, e.ref.grads, e.sigma.grads, e.grads_l2);
  each("params", got.params, e.ref.params, e.sigma.params, e.params_l2);
  each("m", got.m, e.ref.m, e.sigma.m, e.m_l2);
  each("v", got.v, e.ref.v, e.sigma.v, e.v_l2);
  return worst;
}

// The L2 test only where its yardstick is steady (gpt2::kL2MinDof): the loss, one number, off by
// between 16 sigma (4 times the largest run's error can be no more: sqrt(16) sigma) and the
// element test's 19.9 passes; a wide tensor's every element 6 sigma off in the same direction (each
// within the element test) fails by its L2 error; and the degrees of freedom count equal terms.
// The verdict states how near the L2 test came to failing, and where: the tensor whose L2 error is
// the largest share of its bound and that share (to its three digits), at most 1 where it passed,
// above 1 where the L2 test failed.
TEST(Gpt2Reference, L2TestNeedsDegreesOfFreedom) {
  Case k(kTiny, lab::testing::run_seed());
  const auto e = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3));
  ASSERT_EQ(e.runs, 16);
  auto good = k.run<float>(Phase::step);
  ASSERT_TRUE(judge(k, e, good).pass);
  auto expect_margin_stated = [&](const gpt2::Outputs<float>& got, bool passes) {
    const lab::Verdict v = judge(k, e, got);
    const auto [stated, where] = l2_margin(v);
    const auto [margin, tensor] = l2_margin_of(k, e, got);
    ASSERT_GT(margin, 0);
    EXPECT_NEAR(stated, margin, 0.005 * margin) << v.note;
    EXPECT_EQ(where, tensor) << v.note;
    if (passes) EXPECT_LE(stated, 1) << v.note;
    else EXPECT_GT(stated, 1) << v.note;
    std::printf("  %s: %s\n", passes ? "the fp32 stand-in" : "a wide tensor 6 sigma off", v.note.c_str());
  };
  expect_margin_stated(good, true);
  // The fp32 loss nearest 18 sigma above the reference, in sigmas.
  auto off_loss = good;
  off_loss.loss = float(e.ref.loss + 18 * e.sigma.loss);
  const double planted = (double(off_loss.loss) - e.ref.loss) / e.sigma.loss;
  ASSERT_GT(planted, 16.2) << "fp32's grid is too coarse here (sigma " << e.sigma.loss << ")";
  ASSERT_LT(planted, 0.95 * gpt2::element_factor(16, gpt2::kElementFalseAlarm));
  ASSERT_GT(planted * e.sigma.loss, gpt2::kL2Factor * e.loss_l2);
  EXPECT_TRUE(judge(k, e, off_loss).pass) << judge(k, e, off_loss).details();

  const auto tensors = gpt2::layout(k.c);
  const auto& wide = *std::max_element(tensors.begin(), tensors.end(),
                                       [](const auto& a, const auto& b) { return a.size < b.size; });
  const std::span<const double> sigma(e.sigma.grads.data() + wide.offset, wide.size);
  EXPECT_GE(gpt2::l2_dof(sigma), gpt2::kL2MinDof) << wide.name;
  auto off_tensor = good;
  for (std::size_t i = wide.offset; i < wide.offset + wide.size; ++i)
    off_tensor.grads[i] = float(e.ref.grads[i] + 6 * e.sigma.grads[i]);
  const auto verdict = judge(k, e, off_tensor);
  EXPECT_FALSE(verdict.pass) << wide.name << " 6 sigma off everywhere passed";
  EXPECT_NE(verdict.reason.find("L2 error"), std::string::npos) << verdict.reason;
  expect_margin_stated(off_tensor, false);
  EXPECT_EQ(l2_margin(verdict).second, "grads " + wide.name) << verdict.note;

  EXPECT_NEAR(gpt2::l2_dof(std::vector<double>(50, 3e-7)), 50, 1e-9);
  EXPECT_NEAR(gpt2::l2_dof(std::vector<double>{1, 1e-3, 1e-3}), 1, 1e-5);
  EXPECT_EQ(gpt2::l2_dof(std::vector<double>(4, 0)), 0);
}

// The per-element factor is Student's t quantile: the table's t(0.975, 8) = 2.306 and
// t(0.995, 4) = 4.604, and the factor the checks use, a two-sided 1e-12 at 16 runs, 19.94 (as
// scipy.stats.t.isf(0.5e-12, 16) gives it).
TEST(Gpt2Reference, ElementFactorIsTheTQuantile) {
  EXPECT_NEAR(gpt2::element_factor(8, 0.05), 2.306, 2e-3);
  EXPECT_NEAR(gpt2::element_factor(4, 0.01), 4.604, 2e-3);
  EXPECT_NEAR(gpt2::element_factor(gpt2::kMonteCarloRuns, gpt2::kElementFalseAlarm), 19.94, 0.01);
}

// AdamW's first step from zero moments without decay moves every parameter by lr g / (|g| + eps)
// (the bias corrections cancel): the optimizer written as PyTorch's order of operations.
TEST(Gpt2Reference, AdamWFirstStepIsTheSignedLearningRate) {
  Case k(kTiny, lab::testing::run_seed());
  std::fill(k.m.begin(), k.m.end(), 0.f);
  std::fill(k.v.begin(), k.v.end(), 0.f);
  gpt2::AdamW hp;
  hp.weight_decay = 0;
  const auto r = gpt2::reference<double>(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(1), hp);
  for (std::size_t i = 0; i < k.params.size(); i += 97) {
    const double g = r.grads[i];
    EXPECT_NEAR(r.params[i], k.params[i] - hp.lr * g / (std::fabs(g) + hp.eps), 1e-15) << i;
  }
}

TEST(Gpt2Reference, RejectsBadInputs) {
  Case k(kTiny, 1);
  auto tokens = k.tokens;
  tokens[3] = k.c.vocab;
  EXPECT_THROW(gpt2::reference<double>(k.c, Phase::forward, k.params, tokens, k.targets), std::invalid_argument);
  std::vector<float> short_params(k.params.begin(), k.params.end() - 1);
  EXPECT_THROW(gpt2::reference<double>(k.c, Phase::forward, short_params, k.tokens, k.targets),
               std::invalid_argument);
}

TEST(Gpt2Curves, AgreeWithinTheWindowTolerance) {
  std::vector<double> a(200), b(200);
  for (int s = 0; s < 200; ++s) {
    a[s] = 4.57 * std::exp(-s / 60.0) + 1.0;
    b[s] = a[s] + 0.015 * std::sin(s);  // step-to-step noise of two roundings
  }
  EXPECT_EQ(gpt2::compare_curves(a, a), "");
  EXPECT_EQ(gpt2::compare_curves(a, b), "");
  auto shifted = a;
  for (double& x : shifted) x += 0.1;  // a constant offset: a different model or a wrong loss
  EXPECT_NE(gpt2::compare_curves(a, shifted), "");
  auto diverged = a;
  for (int s = 150; s < 200; ++s) diverged[s] += 0.05 * (s - 149);  // training falls apart late
  const std::string why = gpt2::compare_curves(a, diverged);
  EXPECT_NE(why.find("steps 1"), std::string::npos) << why;
  auto nan = a;
  nan[100] = std::nan("");
  EXPECT_NE(gpt2::compare_curves(a, nan), "");
  EXPECT_NE(gpt2::compare_curves(a, std::vector<double>(a.begin(), a.end() - 1)), "");
}

// The corpus: deterministic, every token present, the permutation followed about 7 times in 8,
// and its entropy the formula's (checked against the entropy of its own transition counts).
TEST(Gpt2Training, SyntheticCorpusIsTheStatedWalk) {
  const std::size_t n = 400000;
  const auto a = gpt2::synthetic_corpus(97, n), b = gpt2::synthetic_corpus(97, n);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, gpt2::synthetic_corpus(97, n, 7));
  std::vector<std::vector<int>> next(97, std::vector<int>(97, 0));
  for (std::size_t i = 1; i < a.size(); ++i) {
    ASSERT_GE(a[i], 0);
    ASSERT_LT(a[i], 97);
    ++next[a[i - 1]][a[i]];
  }
  // The conditional entropy of the transitions counted, each row's plug-in estimate corrected for
  // its bias by Miller and Madow's (bins seen - 1) / (2 draws): about 4000 draws a row, so the
  // estimate's spread is near 0.005 nats.
  double follow = 0, h = 0;
  for (const auto& row : next) {
    const double draws = std::accumulate(row.begin(), row.end(), 0.0);
    ASSERT_GT(draws, 0) << "a token never appears";
    follow += *std::max_element(row.begin(), row.end());
    double hr = 0;
    int seen = 0;
    for (int k : row)
      if (k) hr -= k / draws * std::log(k / draws), ++seen;
    h += draws * (hr + (seen - 1) / (2 * draws));
  }
  EXPECT_NEAR(follow / (n - 1), 7.0 / 8 + 1.0 / (8 * 97), 0.005);
  EXPECT_NEAR(h / (n - 1), gpt2::corpus_entropy(97), 0.02);
  EXPECT_NEAR(gpt2::corpus_entropy(97), 0.939, 0.001);
  std::vector<std::int32_t> tokens, targets;
  gpt2::corpus_batch(a, kTiny, 5, tokens, targets);
  for (std::size_t i = 0; i + 1 < tokens.size(); ++i)
    if ((i + 1) % kTiny.context) {
      EXPECT_EQ(targets[i], tokens[i + 1]);
    }
}

// 200 steps of the reference on the corpus: the loss falls from about ln 97 = 4.57 to below
// kTrainedLoss, and the same run in fp32 arithmetic (the formulas' other rounding; the stand-in for
// a kernel) stays within the curve tolerance of the double one.
TEST(Gpt2Training, ReferenceLearnsTheCorpusAndFp32FollowsIt) {
  const Case k(kTiny, lab::testing::run_seed());
  const auto corpus = gpt2::synthetic_corpus(kTiny.vocab, gpt2::kTrainCorpusLength);
  const auto ref = gpt2::train_reference<double>(kTiny, k.params, corpus, gpt2::kTrainSteps);
  const auto f32 = gpt2::train_reference<float>(kTiny, k.params, corpus, gpt2::kTrainSteps);
  ASSERT_EQ(ref.size(), std::size_t(gpt2::kTrainSteps));
  EXPECT_NEAR(ref.front(), std::log(97.0), 0.1);
  const double last = std::accumulate(ref.end() - 10, ref.end(), 0.0) / 10;
  EXPECT_LT(last, gpt2::kTrainedLoss);
  EXPECT_GT(last, gpt2::corpus_entropy(kTiny.vocab) - 0.1) << "below the corpus's entropy: a leak";
  EXPECT_EQ(gpt2::compare_curves(ref, f32, gpt2::kTrainCurves), "");
}

}  // namespace

// The topic's shapes: every check shape is valid and within the CPU reference's reach, every sweep
// shape valid and beyond it (never verified by accident at a cost of minutes), and the phase and
// the model's constraints are enforced with a message.
TEST(Gpt2Topic, ShapesAreValidAndCheckable) {
  for (const lab::Shape& s : Gpt2Step::checks()) {
    EXPECT_EQ(Gpt2Step::validate(s), "") << s.str();
    EXPECT_TRUE(Gpt2Step::verifiable(s)) << s.str();
  }
  EXPECT_EQ(Gpt2Step::sweep().size(), 12u);
  for (const lab::Shape& s : Gpt2Step::sweep()) {
    EXPECT_EQ(Gpt2Step::validate(s), "") << s.str();
    EXPECT_FALSE(Gpt2Step::verifiable(s)) << s.str();
  }
  EXPECT_NE(Gpt2Step::validate(lab::Shape{2, 64, 4, 16, 2, 97, 4}).find("phase"), std::string::npos);
  EXPECT_NE(Gpt2Step::validate(lab::Shape{2, 64, 5, 16, 2, 97, 1}).find("multiple of heads"), std::string::npos);
  EXPECT_NE(Gpt2Step::validate(lab::Shape{2, 64, 4, 2048, 2, 97, 1}).find("context"), std::string::npos);
}

// The work model: the backward does twice the forward's products, the step moves the optimizer's
// state, and the products' FLOPs are within 2% of the usual 6 N tokens rule for the small model
// at context 128 (N without the embeddings; attention's share is small there).
TEST(Gpt2Topic, WorkModel) {
  const lab::Shape f{12, 768, 12, 128, 4, 10000, 1}, b{12, 768, 12, 128, 4, 10000, 2}, s{12, 768, 12, 128, 4, 10000, 3};
  EXPECT_DOUBLE_EQ(Gpt2Step::work(b).flops, 3 * Gpt2Step::work(f).flops);
  EXPECT_DOUBLE_EQ(Gpt2Step::work(s).flops, Gpt2Step::work(b).flops);
  EXPECT_GT(Gpt2Step::work(s).bytes, 4 * Gpt2Step::work(b).bytes);
  const gpt2::Config c = gpt2::config_of(f);
  const double n = double(gpt2::param_count(c)) - double(c.vocab + gpt2::kPositions) * c.d;
  EXPECT_NEAR(Gpt2Step::work(b).flops / (6 * n * double(c.tokens())), 1.0, 0.02);
}

// The memory a program checks before it allocates is what the step's buffers hold, not the bytes it
// moves: the 2.7B model's full step moves 36 bytes a parameter (92.6 GB, more than an 80 GB card
// holds) but holds 16 (41.1 GB; the fused step peaks at 39.4 GiB), so a program must not refuse it.
TEST(Gpt2Topic, MemoryIsWhatTheBuffersHoldNotTheBytesMoved) {
  const lab::Shape s{32, 2560, 32, 128, 4, 10000, 3};
  const double n = double(gpt2::param_count(gpt2::config_of(s)));
  EXPECT_NEAR(n, 2571.5e6, 0.1e6);
  EXPECT_GT(Gpt2Step::work(s).bytes, 85e9);
  EXPECT_DOUBLE_EQ(Gpt2Step::work(s).least_memory(), 16 * n + 8 * 4 * 128);
  EXPECT_LT(Gpt2Step::work(s).least_memory(), 80e9);
  const lab::Shape f{32, 2560, 32, 128, 4, 10000, 1};
  EXPECT_DOUBLE_EQ(Gpt2Step::work(f).least_memory(), 4 * n + 8 * 4 * 128);
}

// The bf16 check where every token is alike, both ways: at d_model 1 a LayerNorm's output is its
// bias alone, every token's the same, and so are the logits; the head's weight gradient sums 100
// equal products, whose bf16 roundings are equal too and add up rather than average out. The fp32
// stand-in rounding as the bf16 variants do passes (it failed when the Monte Carlo drew each
// product's rounding independently: seed 268368149983330 is the fuzz's that found it, against the
// GPU step 9). Only the element test judges here (each tensor's error lies in a few elements: below
// kL2MinDof degrees of freedom), at 20 sigma, so the check at this shape is that loose both ways.
TEST(Gpt2Reference, Bf16CheckWhereEveryTokenIsAlike) {
  const auto rounding = gpt2::ModelOptions::for_precision("bf16+bf16-attention");
  gpt2::ModelOptions bf16 = rounding;
  bf16.products = gpt2::ModelOptions::Products::bf16;
  const Config c{1, 1, 1, 100, 1, 67};
  for (const std::uint64_t seed : {std::uint64_t{268368149983330}, lab::testing::run_seed()}) {
    Case k(c, seed);
    const auto e = gpt2::expected(k.c, Phase::forward_backward, k.params, k.tokens, k.targets, {}, {}, rounding);
    const auto mine = k.run<float>(Phase::forward_backward, 3, bf16);
    const lab::Verdict v = gpt2::judge(e, k.c, mine.loss, mine.grads, {}, {}, {});
    EXPECT_TRUE(v.pass) << "seed " << seed << ": " << v.details();
  }
}

// The same-precision test (issue #44): a bf16 step's L2 error against twice that of the fp32
// stand-in that rounds where the bf16 steps round. The Monte Carlo check must allow whatever any
// rounding could do, and so passed the MLP's first product 1% high on half its columns
// (gpt2_bf16_fc_1pct, on the CPU and on the GPU); this test sees what these roundings did. At every
// check shape of the topic with a gradient, the stand-in summing its products in the other order
// (another implementation of the same roundings, as a GPU kernel is) passes it, and the stand-in
// with the planted 1% fails it, as enforced, at some shape; the report mode leaves the verdict as
// the Monte Carlo test gives it and names the ratio.
TEST(Gpt2Reference, SamePrecisionTestCatchesAOnePercentProduct) {
  const auto rounding = gpt2::ModelOptions::for_precision("bf16+bf16-attention");
  gpt2::ModelOptions stand_in;
  EXPECT_FALSE(gpt2::ModelOptions::for_precision("fp32").same_precision_stand_in(stand_in));
  EXPECT_FALSE(gpt2::ModelOptions::for_precision("3xtf32+3xtf32-attention").same_precision_stand_in(stand_in));
  ASSERT_TRUE(rounding.same_precision_stand_in(stand_in));
  EXPECT_EQ(stand_in.products, gpt2::ModelOptions::Products::bf16);
  EXPECT_TRUE(stand_in.attention_in_bf16);
  gpt2::ModelOptions other_order = stand_in, planted = stand_in;
  other_order.sums_reversed = true;
  planted.planted_fc_odd_scale = 1.01;
  int caught = 0, shapes = 0, monte_carlo_caught = 0;
  for (const lab::Shape& s : Gpt2Step::checks()) {
    const Config c = gpt2::config_of(s);
    const Phase phase = Phase(s[6]);
    if (phase == Phase::forward) continue;  // the loss alone: one number, no tensor to hold
    ++shapes;
    Case k(c, lab::testing::run_seed());
    const auto e = gpt2::expected(k.c, phase, k.params, k.tokens, k.targets, k.opt(3), {}, rounding);
    ASSERT_TRUE(e.same_precision);
    ASSERT_EQ(e.stand_in_grads_l2.size(), gpt2::layout(c).size());
    const std::string where = "L" + std::to_string(c.layers) + " d" + std::to_string(c.d) + " T" +
                              std::to_string(c.context) + " " + gpt2::phase_name(phase);
    auto verdict = [&](const gpt2::ModelOptions& o, gpt2::SamePrecision mode) {
      const auto got = k.run<float>(phase, 3, o);
      return gpt2::judge(e, k.c, got.loss, got.grads, got.params, got.m, got.v, mode);
    };
    const lab::Verdict good = verdict(other_order, gpt2::SamePrecision::enforce);
    EXPECT_TRUE(good.pass) << where << ": " << good.details();
    EXPECT_NE(good.note.find("same precision (enforced)"), std::string::npos) << good.note;
    const lab::Verdict bad = verdict(planted, gpt2::SamePrecision::enforce);
    caught += !bad.pass;
    const lab::Verdict reported = verdict(planted, gpt2::SamePrecision::report);
    monte_carlo_caught += !reported.pass;
    EXPECT_NE(reported.note.find("same precision (reported)"), std::string::npos) << reported.note;
    std::printf("  %s: other order: %s; planted 1%%: %s\n", where.c_str(), good.note.c_str(),
                bad.pass ? "passed" : bad.reason.substr(0, 160).c_str());
  }
  std::printf("same-precision test: the planted 1%% caught at %d of %d shapes (the Monte Carlo test alone: %d)\n",
              caught, shapes, monte_carlo_caught);
  // Caught, as a check run judges it: at least one shape fails. (A 1% error in half of one product
  // comes out at 2.0 to 2.8 times the stand-in's error in the tensor that shows it most, against a
  // bound of 2: bf16's own roundings, 2^-9 of each operand, are not far below 1%. Over four seeds
  // on the CPU it failed 10, 9, 10 and 8 of the 10 shapes.)
  EXPECT_GE(caught, 1) << "the MLP's first product 1% high on half its columns passed at every shape";
}

// The same-precision test where the stand-in is exact (the fuzz's failure on the GPU, 2026-11-27:
// vanilla_bf16 at 2x1x1x67x2x93x2, seed 109173136164868). At d_model 1 a LayerNorm passes no
// gradient (x - mean(x) is zero, and so is g - mean(g)), so every gradient below the final
// LayerNorm is exactly zero in the reference; the stand-in computes g - mean(g) as written and gets
// zero too, and the bound, twice its error plus 2^-20 of the reference's norm, was zero. A GPU kernel
// that contracts dy w - mean_g into one multiply-add (nvcc does by default) gets g's rounding error
// instead, which the bound must allow: fp32's freedom around the stand-in (Expected::freedom_*).
// The stand-in contracted as the GPU does (ModelOptions::contracted) is off the stand-in in those
// tensors and passes; the planted 1% still fails the test at the shapes above.
TEST(Gpt2Reference, SamePrecisionAllowsFp32sFreedomWhereTheStandInIsExact) {
  const auto rounding = gpt2::ModelOptions::for_precision("bf16+bf16-attention");
  gpt2::ModelOptions contracted;
  ASSERT_TRUE(rounding.same_precision_stand_in(contracted));
  contracted.contracted = true;
  const Config c{2, 1, 1, 67, 2, 93};
  for (const std::uint64_t seed : {std::uint64_t{109173136164868}, lab::testing::run_seed()}) {
    Case k(c, seed);
    const auto e = gpt2::expected(k.c, Phase::forward_backward, k.params, k.tokens, k.targets, {}, {}, rounding);
    ASSERT_TRUE(e.same_precision);
    const auto tensors = gpt2::layout(c);
    ASSERT_EQ(e.freedom_grads_l2.size(), tensors.size());
    const auto got = k.run<float>(Phase::forward_backward, 3, contracted);
    const auto& wte = tensors[0];
    ASSERT_EQ(wte.name, "wte.weight");
    double ref_sq = 0, got_sq = 0;
    for (std::size_t i = wte.offset; i < wte.offset + wte.size; ++i)
      ref_sq += e.ref.grads[i] * e.ref.grads[i], got_sq += double(got.grads[i]) * got.grads[i];
    // What made the old bound zero, and what the GPU did: the reference and the stand-in exact, the
    // contracted stand-in not.
    EXPECT_EQ(ref_sq, 0) << "seed " << seed << ": the reference's wte gradient is not zero at d_model 1";
    EXPECT_EQ(e.stand_in_grads_l2[0], 0) << "seed " << seed;
    EXPECT_GT(got_sq, 0) << "seed " << seed << ": the contracted stand-in gave the exact zeros too";
    EXPECT_GT(e.freedom_grads_l2[0], std::sqrt(got_sq) / gpt2::kSamePrecisionFactor)
        << "seed " << seed << ": fp32's freedom does not cover one contracted multiply-add";
    const lab::Verdict v = gpt2::judge(e, k.c, got.loss, got.grads, {}, {}, {});
    EXPECT_TRUE(v.pass) << "seed " << seed << ": " << v.details();
    // The same-precision test judges only the tensors whose error has kL2MinDof degrees of freedom
    // (gpt2_judge.cpp: `steady`), and names itself in the note when it judged one. At the fuzz's seed
    // some tensors do; at d_model 1 another seed may leave none, and the note is then empty, which
    // is the judge's design, not a failure (CI, 2026-12-03: seed 158013584962805). Where it judged,
    // it was enforced.
    if (seed == 109173136164868 || v.note.find("same precision") != std::string::npos) {
      EXPECT_NE(v.note.find("same precision (enforced)"), std::string::npos) << "seed " << seed << ": " << v.note;
    }
  }
}

// expected()'s runs side by side on several threads give what one thread gives, bit for bit: every
// Monte Carlo run draws from its own stream in its own thread's state, and the runs are folded in
// the same order whatever the count (a check that moved with the machine's cores would pass on one
// machine and fail on another). Every field of Expected, at the full step with the bf16 rounding
// (the stand-in and its freedom runs too), on 1, 2, 3 and 7 threads (waves that split the 22 runs
// unevenly) and the machine's own count. A run's failure reaches the caller, and a bad
// LAB_REFERENCE_THREADS is named.
TEST(Gpt2Reference, ExpectedIsTheSameOnAnyNumberOfThreads) {
  const auto rounding = gpt2::ModelOptions::for_precision("bf16+bf16-attention");
  const Config c{1, 32, 2, 12, 2, 41};
  Case k(c, lab::testing::run_seed());
  auto run = [&](int threads) {
    return gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, rounding,
                          gpt2::kMonteCarloRuns, 7, threads);
  };
  const gpt2::Expected one = run(1);
  ASSERT_TRUE(one.same_precision);
  ASSERT_EQ(one.freedom_grads_l2.size(), gpt2::layout(c).size());
  auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
             return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
           });
  };
  auto outputs = [&](const gpt2::Outputs<double>& a, const gpt2::Outputs<double>& b) {
    return std::bit_cast<std::uint64_t>(a.loss) == std::bit_cast<std::uint64_t>(b.loss) && same(a.grads, b.grads) &&
           same(a.params, b.params) && same(a.m, b.m) && same(a.v, b.v);
  };
  for (const int threads : {2, 3, 7, 0}) {
    const gpt2::Expected e = run(threads);
    const std::string at = "on " + std::to_string(threads) + " threads";
    EXPECT_TRUE(outputs(e.ref, one.ref)) << at;
    EXPECT_TRUE(outputs(e.sigma, one.sigma)) << at;
    EXPECT_TRUE(outputs(e.curvature, one.curvature)) << at;
    EXPECT_EQ(e.loss_l2, one.loss_l2) << at;
    for (auto f : {&gpt2::Expected::grads_l2, &gpt2::Expected::params_l2, &gpt2::Expected::m_l2,
                   &gpt2::Expected::v_l2, &gpt2::Expected::stand_in_grads_l2, &gpt2::Expected::stand_in_params_l2,
                   &gpt2::Expected::stand_in_m_l2, &gpt2::Expected::stand_in_v_l2,
                   &gpt2::Expected::freedom_grads_l2, &gpt2::Expected::freedom_params_l2,
                   &gpt2::Expected::freedom_m_l2, &gpt2::Expected::freedom_v_l2})
      EXPECT_TRUE(same(e.*f, one.*f)) << at;
  }
  // A different seed moves the runs (the comparison above can fail).
  const gpt2::Expected other = gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {},
                                              rounding, gpt2::kMonteCarloRuns, 8, 3);
  EXPECT_FALSE(same(other.sigma.grads, one.sigma.grads));
  EXPECT_FALSE(same(other.freedom_grads_l2, one.freedom_grads_l2));

  auto bad = k;
  bad.tokens[0] = c.vocab;  // every run refuses it
  EXPECT_THROW(gpt2::expected(bad.c, Phase::step, bad.params, bad.tokens, bad.targets, bad.opt(3), {}, rounding,
                              gpt2::kMonteCarloRuns, 7, 4),
               std::invalid_argument);
  const char* saved = std::getenv("LAB_REFERENCE_THREADS");
  const std::string keep = saved ? saved : "";
  for (const char* value : {"0", "-2", "four", "3x"}) {
    ::setenv("LAB_REFERENCE_THREADS", value, 1);
    try {
      (void)gpt2::expected(k.c, Phase::forward, k.params, k.tokens, k.targets);
      ADD_FAILURE() << "LAB_REFERENCE_THREADS=" << value << " was accepted";
    } catch (const std::invalid_argument& x) {
      EXPECT_NE(std::string(x.what()).find("LAB_REFERENCE_THREADS"), std::string::npos) << x.what();
    }
  }
  ::setenv("LAB_REFERENCE_THREADS", "2", 1);
  EXPECT_TRUE(outputs(gpt2::expected(k.c, Phase::step, k.params, k.tokens, k.targets, k.opt(3), {}, rounding,
                                     gpt2::kMonteCarloRuns, 7)
                          .sigma,
                      one.sigma));
  if (saved) ::setenv("LAB_REFERENCE_THREADS", keep.c_str(), 1);
  else ::unsetenv("LAB_REFERENCE_THREADS");
}

// A check enforces the same-precision test unless asked to report (as every program's --check-only,
// the fuzz and planted_bugs.sh run it): a product 5% high on half its columns fails the default
// judge, and the report mode passes on the verdict of the Monte Carlo test and names the ratio.
TEST(Gpt2Reference, SamePrecisionTestIsEnforcedByDefault) {
  const auto rounding = gpt2::ModelOptions::for_precision("bf16+bf16-attention");
  gpt2::ModelOptions planted;
  ASSERT_TRUE(rounding.same_precision_stand_in(planted));
  planted.planted_fc_odd_scale = 1.05;
  Case k(kTiny, lab::testing::run_seed());
  const auto e = gpt2::expected(k.c, Phase::forward_backward, k.params, k.tokens, k.targets, {}, {}, rounding);
  const auto got = k.run<float>(Phase::forward_backward, 3, planted);
  const lab::Verdict enforced = gpt2::judge(e, k.c, got.loss, got.grads, {}, {}, {});
  const lab::Verdict reported =
      gpt2::judge(e, k.c, got.loss, got.grads, {}, {}, {}, gpt2::SamePrecision::report);
  EXPECT_FALSE(enforced.pass) << "5% on half of a product passed the default judge: " << enforced.note;
  EXPECT_NE(enforced.note.find("same precision (enforced)"), std::string::npos) << enforced.note;
  EXPECT_NE(reported.note.find("same precision (reported)"), std::string::npos) << reported.note;
}
