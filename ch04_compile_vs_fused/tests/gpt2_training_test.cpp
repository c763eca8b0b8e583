// The training check on the device: every GPT-2 variant, 200 full steps on the synthetic corpus,
// against the double reference's run from the same parameters (gpt2_model.hpp: kTrainSteps,
// kTrainedLoss, kTrainCurves).
#include <gtest/gtest.h>

#include <numeric>

#include "gpt2.cuh"
#include "lab/registry.hpp"
#include "lab/testing.hpp"

namespace {

TEST(Gpt2Training, EveryVariantFollowsTheReferenceFor200Steps) {
  LAB_REQUIRE_GPU();
  const auto variants = lab::Registry::global().of_topic(Gpt2Step::name);
  ASSERT_FALSE(variants.empty());
  const std::uint64_t seed = lab::testing::run_seed();
  const auto corpus = gpt2::synthetic_corpus(gpt2::kTrainConfig.vocab, gpt2::kTrainCorpusLength);
  std::vector<double> ref;
  std::vector<float> params0;
  for (const lab::Variant* v : variants) {
    const gpt2::TrainRun run = gpt2::train_on_device(*v, seed);
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
  }
}

}  // namespace
