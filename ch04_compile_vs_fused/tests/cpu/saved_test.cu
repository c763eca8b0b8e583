// What the fused GPT-2 steps keep for their backward (gpt2/fused/saved.cuh), on the CPU: the tensors
// a block and the head carve lie apart, each inside the memory its floats() counts, and with KeepLn
// (optimized_gpt2_step_fused_bf16_keep_ln.cu) the LayerNorms' outputs are among them, B T d values
// each in the products' type, and nothing else moves in size.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "gpt2/fused/saved.cuh"
#include "tests/gpt2_second_step_shapes.hpp"

namespace {

using bf16 = __nv_bfloat16;

// Bytes a tensor of `count` values of T takes in a Carver (256-byte aligned).
template <class T>
std::size_t carved_floats(std::size_t count) {
  return (count * sizeof(T) + 255) / 256 * 64;
}

struct Span {
  const void* at;
  std::size_t bytes;
};

// Every span non-null, inside [base, base + floats), and no two overlapping.
void expect_apart(const std::vector<Span>& spans, const float* base, std::size_t floats) {
  const auto lo = reinterpret_cast<std::uintptr_t>(base), hi = lo + floats * sizeof(float);
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const auto a = reinterpret_cast<std::uintptr_t>(spans[i].at);
    ASSERT_NE(spans[i].at, nullptr) << "tensor " << i;
    EXPECT_GE(a, lo) << "tensor " << i;
    EXPECT_LE(a + spans[i].bytes, hi) << "tensor " << i;
    for (std::size_t j = 0; j < i; ++j) {
      const auto b = reinterpret_cast<std::uintptr_t>(spans[j].at);
      EXPECT_TRUE(a + spans[i].bytes <= b || b + spans[j].bytes <= a) << "tensors " << j << " and " << i;
    }
  }
}

// A kept-LayerNorm block's tensors as spans (bytes), for expect_apart.
std::vector<Span> block_spans(const Saved<bf16, bf16, true>& s, const gpt2::Config& c) {
  const std::size_t n = c.tokens() * c.d, t = c.tokens(), nh = heads_size(c);
  const std::size_t w = gpt2::stage_begin(c, 1) - gpt2::stage_begin(c, 0);
  return {{s.w, w * 2},     {s.x, n * 4},   {s.mean1, t * 4}, {s.rstd1, t * 4}, {s.q, nh * 2},
          {s.k, nh * 2},    {s.v, nh * 2},  {s.lse, t * c.heads * 4},           {s.att, n * 2},
          {s.mid, n * 4},   {s.mean2, t * 4}, {s.rstd2, t * 4}, {s.h, 4 * n * 2}, {s.ln1, n * 2},
          {s.ln2, n * 2}};
}

gpt2::Config config() {
  gpt2::Config c;
  c.layers = 2, c.d = 96, c.heads = 3, c.context = 40, c.batch = 3, c.vocab = 101;
  return c;
}

TEST(FusedSaved, KeptLayerNormOutputsAreCarvedApart) {
  const gpt2::Config c = config();
  const std::size_t n = c.tokens() * c.d;
  using Kept = Saved<bf16, bf16, true>;
  using Made = Saved<bf16, bf16, false>;
  EXPECT_EQ(Kept::floats(c), Made::floats(c) + 2 * carved_floats<bf16>(n));

  std::vector<float> memory(Kept::floats(c));
  Carver m{memory.data()};
  const Kept s(c, m);
  EXPECT_EQ(m.used, Kept::floats(c));
  expect_apart(block_spans(s, c), memory.data(), memory.size());

  std::vector<float> other(Made::floats(c));
  Carver o{other.data()};
  const Made made(c, o);
  EXPECT_EQ(made.ln1, nullptr);
  EXPECT_EQ(made.ln2, nullptr);
}

TEST(FusedSaved, KeptFinalLayerNormOutputIsTheHeadsEarlyTensor) {
  const gpt2::Config c = config();
  const std::size_t n = c.tokens() * c.d, t = c.tokens();
  using Kept = HeadSaved<bf16, bf16, true>;
  using Made = HeadSaved<bf16, bf16, false>;
  EXPECT_EQ(Kept::floats(c), Made::floats(c) + carved_floats<bf16>(n));

  // The forward alone carves the head from two places: what the last block's pass writes (early,
  // the final LayerNorm's output with it) and what the head makes after (late).
  Carver early_count{nullptr}, late_count{nullptr};
  static_cast<void>(Kept(c, early_count, late_count, t));
  Carver made_early{nullptr}, made_late{nullptr};
  static_cast<void>(Made(c, made_early, made_late, t));
  EXPECT_EQ(early_count.used, made_early.used + carved_floats<bf16>(n));
  EXPECT_EQ(late_count.used, made_late.used);

  std::vector<float> memory(Kept::floats(c));
  Carver m{memory.data()};
  const Kept h(c, m);
  const std::size_t w = gpt2::param_count(c) - gpt2::stage_begin(c, c.layers);
  expect_apart({{h.w, w * 2}, {h.out, n * 4}, {h.meanf, t * 4}, {h.rstdf, t * 4}, {h.logits, t * c.vocab * 2},
                {h.ln, n * 2}},
               memory.data(), memory.size());
}

// The forward alone's one buffer (forward_saved, forward_carvers: FusedStep::place_saved's layout)
// at the shapes of the bf16 steps that keep the final LayerNorm's output: the head's tensors, all
// live at its product, lie apart from each other, and its kept part (written by the last block's
// pass while it reads the block's tensors) apart from the block's; the head's late part may lie over
// the block's. At the fuzz's shape (2026-12-03; one block of width 32, 16386 classes) the late part
// is several times the block's: carved from the buffer's start, it overwrote the LayerNorm's output.
TEST(FusedSaved, ForwardAloneKeepsTheHeadsInputApart) {
  using Block = Saved<bf16, bf16, true>;
  using Head = HeadSaved<bf16, bf16, true>;
  gpt2::Config fuzz;
  fuzz.layers = 1, fuzz.d = 32, fuzz.heads = 2, fuzz.context = 8, fuzz.batch = 2, fuzz.vocab = 16386;
  for (const gpt2::Config& c : {fuzz, config()}) {
    const std::size_t n = c.tokens() * c.d, t = c.tokens();
    const std::size_t rows = (t + 3) / 4;  // the forward's slice of logits (head_slice_rows)
    const gpt2::ForwardSaved at = forward_saved<Block, Head>(c, rows);
    std::vector<float> memory(at.floats);
    ForwardCarvers carve = forward_carvers(at, memory.data());
    const Head h(c, carve.kept, carve.late, rows);
    const Block s(c, carve.block);
    const std::size_t w = gpt2::param_count(c) - gpt2::stage_begin(c, c.layers);
    const std::vector<Span> kept = {{h.out, n * 4}, {h.meanf, t * 4}, {h.rstdf, t * 4}, {h.ln, n * 2}};
    std::vector<Span> head = kept, block = kept;
    head.insert(head.end(), {{h.w, w * 2}, {h.logits, rows * c.vocab * 2}});
    const std::vector<Span> block_tensors = block_spans(s, c);
    block.insert(block.end(), block_tensors.begin(), block_tensors.end());
    SCOPED_TRACE("vocabulary " + std::to_string(c.vocab));
    expect_apart(head, memory.data(), memory.size());
    expect_apart(block, memory.data(), memory.size());
  }
  // The fuzz's shape is the case that needs the layout: the late part outgrows the block's tensors.
  Carver block{nullptr}, kept{nullptr}, late{nullptr};
  static_cast<void>(Block(fuzz, block));
  static_cast<void>(Head(fuzz, kept, late, 4));
  EXPECT_GT(late.used, 4 * block.used);
}

// The second-step test's shapes spill a stage under the latest bf16 steps' saved tensors (the
// LayerNorms' outputs kept, bf16 logits: Saved<bf16, bf16, true>, HeadSaved<bf16, bf16, true>), so
// that optimized_gpt2_step_fused_bf16_adamw_rounds' AdamW writes some stage's copy there, which
// only that test's second step reads.
TEST(FusedSaved, SecondStepShapesSpillAStage) {
  for (const lab::Shape& s : gpt2_tests::kSecondStepShapes) {
    const gpt2::Config c = gpt2::config_of(s);
    std::vector<std::size_t> floats(std::size_t(c.layers) + 1, Saved<bf16, bf16, true>::floats(c));
    floats.back() = HeadSaved<bf16, bf16, true>::floats(c);
    const gpt2::SavedPlan plan = gpt2::plan_saved(c, floats);
    int spilled = 0;
    for (const gpt2::SavedPlace& where : plan.stages) spilled += where.in_grads ? 0 : 1;
    EXPECT_GT(spilled, 0) << s.str() << ": every stage's saved tensors fit in the gradients' buffer";
    std::printf("%s: %d of %d stages spilled\n", s.str().c_str(), spilled, c.layers + 1);
  }
}

}  // namespace
