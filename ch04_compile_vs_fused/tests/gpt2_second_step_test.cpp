// The full step's second step, on the device: each GPT-2 variant runs two full steps, and the
// second is held to the reference run from the state the first left (its parameters and moments,
// one step later; Gpt2Step::Problem::rebase). The check of one step sees only what the step makes
// from its inputs; what a variant carries from one step to the next besides the parameters and the
// moments (the bf16 copies of the weights that optimized_gpt2_step_fused_bf16_adamw_rounds' AdamW
// writes for the next step; the step's number in the replayed graph) only a second step reads.
// One test per variant (Gpt2SecondStep.<program>, lab/variant_tests.hpp): each costs four runs of
// the Monte Carlo reference (12 to 45 s on an H200 with ten beside it), and CTest runs them side
// by side.
#include <gtest/gtest.h>

#include "gpt2/gpt2.cuh"
#include "lab/harness.hpp"
#include "lab/memory.hpp"
#include "lab/registry.hpp"
#include "lab/testing.hpp"
#include "lab/variant_tests.hpp"
#include "tests/gpt2_second_step_shapes.hpp"

namespace {

void second_step(const lab::Variant& v) {
  LAB_REQUIRE_GPU();
  const std::uint64_t seed = lab::testing::run_seed();
  int ran = 0;
  for (const lab::Shape& s : gpt2_tests::kSecondStepShapes) {
    if (!lab::unsupported(v, s).empty()) continue;
    lab::Stream stream;
    lab::Prepared pr = lab::prepare(v, s, seed, stream);
    auto& p = dynamic_cast<Gpt2Step::Problem&>(*pr.problem);
    for (int step = 1; step <= 2; ++step) {
      if (step == 2) p.rebase();
      const lab::Verdict verdict = lab::run_and_verify(*pr.instance, p, stream);
      EXPECT_TRUE(verdict.pass) << v.program << " at " << s.str() << ", step " << step << " of 2 (seed " << seed
                                << "; reproduce with LAB_SEED=" << seed << "): " << verdict.details();
    }
    ++ran;
  }
  if (ran == 0)
    GTEST_SKIP() << "N/A: " << v.program << " runs neither second-step shape ("
                 << lab::unsupported(v, gpt2_tests::kSecondStepShapes[0]) << ")";
}

const lab::testing::PerVariant kSecondStep{"Gpt2SecondStep", Gpt2Step::name, second_step};

}  // namespace
