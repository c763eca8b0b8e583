// A label outside [0, C) must give an error naming it, for every cross-entropy variant, forward
// and backward: never a number, and never a read outside the logits (run under memcheck).
#include <gtest/gtest.h>

#include "lab/harness.hpp"
#include "lab/testing.hpp"
#include "losses.cuh"

namespace {

struct BadLabel {
  lab::Shape shape;
  int row;
  std::int32_t label;
};

void expect_label_error(std::string_view topic, const BadLabel& bad) {
  const auto variants = lab::Registry::global().of_topic(topic);
  ASSERT_GE(variants.size(), 2u) << topic;
  for (const lab::Variant* v : variants) {
    SCOPED_TRACE(v->program + " at " + bad.shape.str());
    lab::Stream stream;
    lab::Prepared pr = lab::prepare(*v, bad.shape, lab::testing::run_seed(), stream);
    auto& problem = pr.problem;
    auto& in = dynamic_cast<CrossEntropyInputs&>(*problem);
    auto labels = in.labels.download();
    labels[static_cast<std::size_t>(bad.row)] = bad.label;
    in.labels.upload(labels);
    problem->poison(stream);
    pr.instance->run(*problem, stream);
    LAB_CHECK(cudaStreamSynchronize(stream));
    const lab::Verdict verdict = problem->verify();
    EXPECT_FALSE(verdict.pass);
    EXPECT_EQ(verdict.reason, "label " + std::to_string(bad.label) + " at row " + std::to_string(bad.row) +
                                  " is outside [0, " + std::to_string(bad.shape[1]) + ")");
    // The same problem with the label repaired passes: the error came from the label alone.
    labels[static_cast<std::size_t>(bad.row)] = 0;
    in.labels.upload(labels);
    problem->poison(stream);
    pr.instance->run(*problem, stream);
    LAB_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(problem->verify().pass);
  }
}

const BadLabel kCases[] = {
    {{5, 33}, 3, 33},          // one past the end, short rows, 4-byte loads
    {{4, 768}, 0, -1},         // negative, a warp per row, float4
    {{3, 4096}, 2, 1 << 30},   // far past the end, long rows
    {{40, 64}, 17, 64},        // packed rows: 4 lanes a row, 8 rows a warp, the bad one mid-warp
    {{9, 8}, 8, -5},           // 2 lanes a row, the last row alone in its warp
    {{2, 9000}, 1, 9000},      // a block per row
};

TEST(CrossEntropyLabels, ForwardReportsTheBadLabel) {
  LAB_REQUIRE_GPU();
  for (const auto& c : kCases) expect_label_error("cross_entropy", c);
}

TEST(CrossEntropyLabels, BackwardReportsTheBadLabel) {
  LAB_REQUIRE_GPU();
  for (const auto& c : kCases) expect_label_error("cross_entropy_backward", c);
}

}  // namespace
