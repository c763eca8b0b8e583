// A label outside [0, C) must give an error naming it, for every cross-entropy variant, forward
// and backward: never a number, and never a read outside the logits (run under memcheck). A row
// labelled ignore_index is not counted, whatever ignore_index is (a class too), and with every row
// ignored the loss is NaN (0/0, as PyTorch's) and the gradient zero. On every storage: the fp32
// topics and their 16-bit twins (cross_entropy_bf16, cross_entropy_backward_bf16, and _fp16).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

constexpr std::string_view kForwards[] = {CrossEntropyFp32::name, CrossEntropyBf16::name, CrossEntropyFp16::name};
constexpr std::string_view kBackwards[] = {CrossEntropyBackwardFp32::name, CrossEntropyBackwardBf16::name,
                                           CrossEntropyBackwardFp16::name};

TEST(CrossEntropyLabels, ForwardReportsTheBadLabel) {
  LAB_REQUIRE_GPU();
  for (std::string_view topic : kForwards)
    for (const auto& c : kCases) expect_label_error(topic, c);
}

TEST(CrossEntropyLabels, BackwardReportsTheBadLabel) {
  LAB_REQUIRE_GPU();
  for (std::string_view topic : kBackwards)
    for (const auto& c : kCases) expect_label_error(topic, c);
}

// The forward's loss and count, and the backward's count and dlogits (as floats), on any storage.
template <template <class> class Topic, class F>
decltype(auto) on_storage(lab::Problem& p, F&& f) {
  if (auto* a = dynamic_cast<typename Topic<float>::Problem*>(&p)) return f(*a);
  if (auto* b = dynamic_cast<typename Topic<__nv_bfloat16>::Problem*>(&p)) return f(*b);
  return f(dynamic_cast<typename Topic<__half>::Problem&>(p));
}
float loss_of(lab::Problem& p, std::size_t i = 0) {
  return on_storage<CrossEntropyOf>(p, [&](auto& q) { return i ? q.count.download()[0] : q.loss.download()[0]; });
}
lab::DeviceBuffer<float>& count_of_backward(lab::Problem& p) {
  return on_storage<CrossEntropyBackwardOf>(p, [](auto& q) -> lab::DeviceBuffer<float>& { return q.count; });
}
std::vector<float> dlogits_of(lab::Problem& p) {
  return on_storage<CrossEntropyBackwardOf>(
      p, [](auto& q) { return std::remove_reference_t<decltype(q)>::S::to_float(q.dlogits.download()); });
}
bool is_backward(lab::Problem& p) {
  return dynamic_cast<CrossEntropyBackwardFp32::Problem*>(&p) || dynamic_cast<CrossEntropyBackwardBf16::Problem*>(&p) ||
         dynamic_cast<CrossEntropyBackwardFp16::Problem*>(&p);
}

// Runs every variant of `topic` at `shape` with its labels set by `relabel` (labels, ignore_index in
// out); returns nothing, calls `check` with the problem after the run.
template <class Relabel, class Check>
void with_labels(std::string_view topic, const lab::Shape& shape, Relabel&& relabel, Check&& check) {
  const auto variants = lab::Registry::global().of_topic(topic);
  ASSERT_GE(variants.size(), 2u) << topic;
  for (const lab::Variant* v : variants) {
    SCOPED_TRACE(v->program + " at " + shape.str());
    lab::Stream stream;
    lab::Prepared pr = lab::prepare(*v, shape, lab::testing::run_seed(), stream);
    auto& in = dynamic_cast<CrossEntropyInputs&>(*pr.problem);
    auto labels = in.labels.download();
    relabel(labels, in.ignore_index);
    in.labels.upload(labels);
    if (is_backward(*pr.problem))  // what the forward would give
      count_of_backward(*pr.problem).upload(std::vector<float>{float(in.counted(labels))});
    pr.problem->poison(stream);
    pr.instance->run(*pr.problem, stream);
    LAB_CHECK(cudaStreamSynchronize(stream));
    check(*pr.problem);
  }
}

// ignore_index may be a class: PyTorch drops the rows of class 3 with ignore_index = 3. Every other
// row labelled 3, the rest drawn as usual; the check (which honours ignore_index) must pass.
TEST(CrossEntropyLabels, IgnoreIndexMayBeAClass) {
  LAB_REQUIRE_GPU();
  for (std::string_view topic : {kForwards[0], kForwards[1], kBackwards[0], kBackwards[1]})
    for (const lab::Shape& shape : {lab::Shape{40, 64}, lab::Shape{7, 33}, lab::Shape{5, 9000}})
      with_labels(
          topic, shape,
          [](std::vector<std::int32_t>& labels, std::int32_t& ignore) {
            for (auto& l : labels) l = l == ignore ? 0 : l;  // the inputs' -100 rows now count
            ignore = 3;
            for (std::size_t r = 1; r < labels.size(); r += 2) labels[r] = 3;
            if (labels[0] == 3) labels[0] = 2;  // row 0 counts
          },
          [](lab::Problem& p) {
            const lab::Verdict v = p.verify();
            EXPECT_TRUE(v.pass) << v.reason;
          });
}

// Every row ignored: K = 0, the loss 0/0 (NaN, as PyTorch's mean over no rows), and the gradient a
// zero everywhere (no row counts; no division by K is used).
TEST(CrossEntropyLabels, EveryRowIgnored) {
  LAB_REQUIRE_GPU();
  const auto all_ignored = [](std::vector<std::int32_t>& labels, std::int32_t& ignore) {
    for (auto& l : labels) l = ignore;
  };
  for (const lab::Shape& shape : {lab::Shape{40, 64}, lab::Shape{3, 4096}, lab::Shape{2, 9000}}) {
    for (std::string_view topic : kForwards)
      with_labels(topic, shape, all_ignored, [](lab::Problem& p) {
        EXPECT_TRUE(std::isnan(loss_of(p)));
        EXPECT_EQ(loss_of(p, 1), 0.f);
        EXPECT_EQ(dynamic_cast<CrossEntropyInputs&>(p).label_error(), "");
      });
    for (std::string_view topic : kBackwards)
      with_labels(topic, shape, all_ignored, [](lab::Problem& p) {
        const auto d = dlogits_of(p);
        EXPECT_EQ(std::count(d.begin(), d.end(), 0.f), std::ptrdiff_t(d.size()));
        EXPECT_EQ(dynamic_cast<CrossEntropyInputs&>(p).label_error(), "");
      });
  }
}

}  // namespace
