// The GPT-2 training step as a topic (the model: gpt2_model.hpp). A shape is one configuration
// and one phase: layers x d_model x heads x context x batch x vocab x phase, with phase 1 the
// forward (the loss only), 2 forward and backward (the loss and every gradient), 3 the full step
// (and the AdamW update of the parameters and moments, in place). Every variant sees the same
// seeded parameters, tokens and optimizer state for a shape.
//
// Work: the products' FLOPs, 2 x tokens x (the blocks' 12 L d^2 weights + the head's V d) forward
// plus causal attention's 2 B L T^2 d (the masked half not computed), three times that with the
// backward; the minimum traffic is each parameter once forward (4N bytes), and the gradients
// written (4N) backward, and the step's read of p, g, m, v and write of p, m, v (28N).
#pragma once

#include <string>
#include <vector>

#include "gpt2/gpt2_model.hpp"
#include "lab/lab.hpp"

namespace gpt2 {

inline Config config_of(const lab::Shape& s) {
  return {int(s[0]), int(s[1]), int(s[2]), int(s[3]), int(s[4]), int(s[5])};
}
inline Phase phase_of(const lab::Shape& s) { return static_cast<Phase>(s[6]); }

// The optimizer state the Problem starts from: moments as after a few steps, at step 3 (so that
// the bias corrections are neither 1 nor the first step's), with PyTorch's default AdamW.
inline constexpr int kCheckStep = 3;

}  // namespace gpt2

namespace lab {
struct Variant;
}

namespace gpt2 {

// One variant's training run on the device (gpt2_training.cu): `steps` full steps on the tiny
// configuration (kTiny below) from the Problem's seeded parameters, the moments zeroed and the
// steps numbered from 1, batch s taken from synthetic_corpus(vocab, kTrainCorpusLength) by
// corpus_batch. params0: the parameters it started from (for the reference's run).
struct TrainRun {
  std::vector<double> losses;  // the loss before each step
  std::vector<float> params0;
};
inline constexpr Config kTrainConfig{2, 64, 4, 16, 2, 97};
TrainRun train_on_device(const lab::Variant& v, std::uint64_t seed, int steps = kTrainSteps);

}  // namespace gpt2

struct Gpt2Step {
  static constexpr const char* name = "gpt2_step";
  static constexpr int chapter = 4;
  static std::vector<std::string> dims() {
    return {"layers", "d_model", "heads", "context", "batch", "vocab", "phase"};
  }
  // The seed's small model at its four contexts, each phase (the report program runs the grid).
  static std::vector<lab::Shape> sweep() {
    std::vector<lab::Shape> out;
    for (int ctx : gpt2::kContexts)
      for (int phase = 1; phase <= 3; ++phase) out.push_back({12, 768, 12, ctx, gpt2::kBatch, gpt2::kVocab, phase});
    return out;
  }
  // The tiny model in every phase, and awkward ones in the full step: head sizes 16, 32, 64, 128
  // and 80 (the 2.7B model's), one head, contexts off every tile (13, 33, 65, 77, 100), batch 1;
  // and a head of 64 at batch 2 (the Hopper kernels' width, with a second batch's rows after the
  // first's in every tensor laid out by token); and a vocabulary past 16384, where the loss's rows
  // no longer fit its one-pass kernel in fp32 (cross_entropy_kernel; bf16 logits two a register:
  // cross_entropy_pairs_kernel), as GPT-2's own 50304 does. 16 tokens: with 4, the model of the
  // logits' rounding alone rejected its own fp32 stand-in at a few head-weight gradients (16 to 28
  // sigma on half the seeds tried, where k is 19.9; 4 to 7 at 16 tokens; with its noise then shared
  // to 8 bits, now 16: reference_arithmetic.hpp, kShareBits), and this shape's check
  // cost a bf16 step about 40 s on the GPU machine with the Monte Carlo runs one at a time (the head's products).
  // That vocabulary in the forward alone too, where the head's weights' copy and logits (B T x V)
  // outgrow the one block's saved tensors they lie over (FusedStep::place_saved): found by the
  // fuzz (2026-12-03) in the bf16 steps that keep the final LayerNorm's output, which it overwrote.
  static std::vector<lab::Shape> checks() {
    return {{2, 64, 4, 16, 2, 97, 1},  {2, 64, 4, 16, 2, 97, 2},   {2, 64, 4, 16, 2, 97, 3},
            {1, 128, 1, 13, 1, 50, 3}, {2, 32, 2, 77, 1, 31, 3},   {1, 64, 4, 33, 1, 97, 3},
            {1, 64, 2, 65, 2, 97, 3},  {1, 128, 2, 100, 1, 61, 3}, {1, 160, 2, 33, 1, 50, 3},
            {1, 128, 2, 65, 2, 97, 3}, {1, 32, 2, 8, 2, 16386, 3},
            {1, 32, 2, 8, 2, 16386, 1}};
  }
  static std::string validate(const lab::Shape& s) {
    if (s[6] < 1 || s[6] > 3) return "phase must be 1 (forward), 2 (forward and backward) or 3 (the full step)";
    for (int i = 0; i < 6; ++i)
      if (s[i] > (std::int64_t{1} << 30)) return "every extent below 2^30";
    if (const std::string why = gpt2::config_of(s).invalid(); !why.empty()) return why;
    return double(gpt2::param_count(gpt2::config_of(s))) * 4 > 1e12 ? "parameters above 1 TB" : "";
  }
  static double forward_flops(const gpt2::Config& c) {
    const double tokens = double(c.tokens()), d = c.d, T = c.context;
    const double products = 2 * tokens * (12.0 * c.layers * d * d + double(c.vocab) * d);
    const double attention = 4.0 * c.batch * c.layers * T * T * d * (T + 1) / (2 * T);
    return products + attention;
  }
  static lab::Work work(const lab::Shape& s) {
    const gpt2::Config c = gpt2::config_of(s);
    const double n = double(gpt2::param_count(c)), tokens = 8 * double(c.tokens());  // tokens and targets
    // memory: the parameters, and the gradients (phases 2, 3) and AdamW's moments (phase 3), each held once.
    switch (gpt2::phase_of(s)) {
      case gpt2::Phase::forward: return {.bytes = 4 * n, .flops = forward_flops(c), .memory = 4 * n + tokens};
      case gpt2::Phase::forward_backward:
        return {.bytes = 8 * n, .flops = 3 * forward_flops(c), .memory = 8 * n + tokens};
      case gpt2::Phase::step: return {.bytes = 36 * n, .flops = 3 * forward_flops(c), .memory = 16 * n + tokens};
    }
    return {};
  }
  // The reference runs on the CPU in double, nine times (gpt2::expected): up to about 1e9 of the
  // model's FLOPs a run.
  static bool verifiable(const lab::Shape& s) { return 3 * forward_flops(gpt2::config_of(s)) <= 1e9; }

  struct Problem : lab::Problem {
    gpt2::Config cfg;
    gpt2::Phase phase;
    gpt2::AdamW hp;
    int step = gpt2::kCheckStep;
    // Inputs: the parameters (updated in place by the full step), tokens and targets (B x T), the
    // moments (full step only; updated in place). Outputs: the loss, the gradients (phases 2, 3).
    lab::DeviceBuffer<float> params, m, v, grads, loss;
    lab::DeviceBuffer<std::int32_t> tokens, targets;
    Problem(const lab::Shape& s, lab::Rng& rng);
    void poison(cudaStream_t s) override;
    lab::Verdict verify() override;
    // The full step only: the state the last run left (the parameters and moments) becomes the
    // inputs that verify() runs the reference from, one step later (step + 1, the same tokens). A
    // second run then checks what a step carries to the next one beside the parameters and
    // moments (the second-step test; a variant's own state, such as the weights' copies that
    // optimized_gpt2_step_fused_bf16_adamw_rounds' AdamW writes for the next step).
    void rebase();

   private:
    // The inputs as they were before any run, kept for the reference (verifiable shapes only).
    std::vector<float> params0_, m0_, v0_;
    std::vector<std::int32_t> tokens_, targets_;
  };
};
