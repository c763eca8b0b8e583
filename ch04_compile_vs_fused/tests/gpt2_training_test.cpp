// The training check on the device: every GPT-2 variant, 200 full steps on the synthetic corpus,
// against the double reference's run from the same parameters (gpt2_model.hpp: kTrainSteps,
// kTrainedLoss, kTrainCurves), and each mixed-precision variant's against the fp32 fused step's
// (kMixedPrecisionCurves).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "gpt2/gpt2.cuh"
#include "lab/registry.hpp"
#include "lab/testing.hpp"

namespace {

// The largest difference of two curves' means over `window` consecutive steps (what compare_curves
// holds to its tolerance), for the log.
double largest_window_difference(const std::vector<double>& a, const std::vector<double>& b, int window) {
  double worst = 0;
  for (std::size_t s = 0; s + window <= std::min(a.size(), b.size()); ++s) {
    double x = 0, y = 0;
    for (int k = 0; k < window; ++k) x += a[s + k], y += b[s + k];
    worst = std::max(worst, std::fabs(x - y) / window);
  }
  return worst;
}

TEST(Gpt2Training, EveryVariantFollowsTheReferenceFor200Steps) {
  LAB_REQUIRE_GPU();
  const auto variants = lab::Registry::global().of_topic(Gpt2Step::name);
  ASSERT_FALSE(variants.empty());
  const std::uint64_t seed = lab::testing::run_seed();
  const auto corpus = gpt2::synthetic_corpus(gpt2::kTrainConfig.vocab, gpt2::kTrainCorpusLength);
  std::vector<double> ref;
  std::vector<float> params0;
  // The fp32 fused step's curve, which the mixed-precision variants are held to as well.
  const std::string kFp32Fused = "optimized_gpt2_step_fused";
  std::vector<double> fp32_fused;
  std::vector<std::pair<const lab::Variant*, std::vector<double>>> mixed;
  for (const lab::Variant* v : variants) {
    const gpt2::TrainRun run = gpt2::train_on_device(*v, seed);
    if (v->program == kFp32Fused) fp32_fused = run.losses;
    if (v->declared.precision.starts_with("bf16")) mixed.emplace_back(v, run.losses);
    if (ref.empty()) {
      params0 = run.params0;
      ref = gpt2::train_reference<double>(gpt2::kTrainConfig, params0, corpus, gpt2::kTrainSteps);
      const double last = std::accumulate(ref.end() - 10, ref.end(), 0.0) / 10;
      EXPECT_LT(last, gpt2::kTrainedLoss) << "the reference did not learn the corpus (seed " << seed << ")";
    }
    ASSERT_EQ(run.params0, params0) << v->program << " started from other parameters";
    const double last = std::accumulate(run.losses.end() - 10, run.losses.end(), 0.0) / 10;
    EXPECT_LT(last, gpt2::kTrainedLoss) << v->program << " (seed " << seed << ")";
    EXPECT_EQ(gpt2::compare_curves(ref, run.losses, gpt2::kTrainCurves), "")
        << v->program << " (seed " << seed << "; reproduce with LAB_SEED=" << seed << "): first loss " << run.losses[0]
        << ", last " << run.losses.back() << " against the reference's " << ref[0] << " and " << ref.back();
    std::printf("%s: largest 10-step mean difference from the reference %.4f nats\n", v->program.c_str(),
                largest_window_difference(ref, run.losses, gpt2::kTrainCurves.window));
  }
  ASSERT_FALSE(fp32_fused.empty()) << kFp32Fused << " is not registered";
  EXPECT_FALSE(mixed.empty()) << "no variant declares a bf16 precision";
  for (const auto& [v, losses] : mixed) {
    EXPECT_EQ(gpt2::compare_curves(fp32_fused, losses, gpt2::kMixedPrecisionCurves), "")
        << v->program << " against " << kFp32Fused << " (seed " << seed << "; reproduce with LAB_SEED=" << seed << ")";
    std::printf("%s: largest 10-step mean difference from %s %.4f nats\n", v->program.c_str(), kFp32Fused.c_str(),
                largest_window_difference(fp32_fused, losses, gpt2::kMixedPrecisionCurves.window));
  }
}

}  // namespace
