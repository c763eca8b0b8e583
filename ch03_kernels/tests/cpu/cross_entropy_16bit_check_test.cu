// The check of the cross-entropy's gradient on 16-bit storage (cross_entropy_backward_bf16 and
// _fp16), checked both ways on the CPU (no GPU), for each storage: a correct kernel (the fused
// kernel's fp32 arithmetic on the widened logits, each gradient rounded to the nearest bf16 or fp16)
// passes the topic's bound and comes near it (the bound is the rounding's own, not a loose one);
// fp32's bound alone fails it; a 1% error fails, in every second element or in one. In fp16 most of
// a wide row's gradient lies below the normal range (subnormal or zero): the bound's floor holds
// those, and without it a correct gradient fails. The forward's outputs (the loss, the count, each
// row's lse) stay fp32 on 16-bit logits and keep fp32's bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "losses.cuh"
#include "storages.hpp"

namespace {

using storages::kNear;
using storages::round_to;

// The topic's inputs, in T: logits in [-8, 8], labels in [0, C), about one row in 16 ignored
// (never row 0); the saved lse in double rounded to float, as the topic makes it.
struct Rows {
  int rows, classes;
  std::vector<float> logits, lse;
  std::vector<std::int32_t> labels;
  double counted = 0;
};
template <class T>
Rows make_rows(int rows, int classes, unsigned seed) {
  std::mt19937 gen(seed);
  Rows in{rows, classes, std::vector<float>(std::size_t(rows) * classes), std::vector<float>(rows),
          std::vector<std::int32_t>(rows)};
  for (float& v : in.logits) v = round_to<T>(std::uniform_real_distribution<float>(-8.f, 8.f)(gen));
  for (int r = 0; r < rows; ++r) {
    in.labels[r] = std::uniform_int_distribution<int>(0, classes - 1)(gen);
    if (r > 0 && std::uniform_int_distribution<int>(0, 15)(gen) == 0) in.labels[r] = CrossEntropyInputs::kIgnoreIndex;
    in.counted += in.labels[r] != CrossEntropyInputs::kIgnoreIndex;
    double m = -INFINITY, s = 0;
    const float* x = in.logits.data() + std::size_t(r) * classes;
    for (int j = 0; j < classes; ++j) m = std::max(m, double(x[j]));
    for (int j = 0; j < classes; ++j) s += std::exp(x[j] - m);
    in.lse[r] = float(m + std::log(s));
  }
  return in;
}

// The fused kernel's arithmetic in fp32 (exp(x - lse) - onehot, times dloss / K), rounded to T;
// element i scaled by scale(i) first where a test plants an error.
template <class T, class F>
std::vector<float> grads(const Rows& in, float g, F scale) {
  std::vector<float> d(in.logits.size(), 0.f);
  const float k = float(in.counted), s = g / k;
  for (int r = 0; r < in.rows; ++r) {
    if (in.labels[r] == CrossEntropyInputs::kIgnoreIndex) continue;
    for (int j = 0; j < in.classes; ++j) {
      const std::size_t i = std::size_t(r) * in.classes + j;
      d[i] = round_to<T>(scale(i) * ((std::exp(in.logits[i] - in.lse[r]) - (j == in.labels[r] ? 1.f : 0.f)) * s));
    }
  }
  return d;
}
template <class T>
std::vector<float> grads(const Rows& in, float g) {
  return grads<T>(in, g, [](std::size_t) { return 1.f; });
}

// The topic's check; floor: the rounding's absolute bound the slack holds (the storage's, unless a
// test takes it away).
template <class T>
lab::Verdict check(const Rows& in, float g, const std::vector<float>& got, lab::Tolerance tol,
                   double floor = lab::StorageOf<T>::kFloor) {
  const loss::GradReference ref =
      loss::grad_reference(in.logits, in.labels, in.lse, g, in.counted, in.rows, in.classes,
                           CrossEntropyInputs::kIgnoreIndex, lab::StorageOf<T>::kRounding, floor);
  return lab::compare(got, ref.dlogits, tol, "dlogits", {in.rows, in.classes}, ref.slack);
}

template <class T>
class CrossEntropyBackward16BitCheck : public ::testing::Test {};
TYPED_TEST_SUITE(CrossEntropyBackward16BitCheck, storages::Both, storages::Name);

// dloss 1024, a loss scale as mixed-precision training uses, makes most gradients large against the
// bound's absolute 1e-5, so that the rounding decides the bound somewhere in every row.
constexpr float kScale = 1024.f;

TYPED_TEST(CrossEntropyBackward16BitCheck, CorrectRoundingPassesAndComesNearTheBound) {
  using T = TypeParam;
  for (const auto& [rows, classes] : {std::pair{64, 768}, std::pair{37, 512}, std::pair{3, 4097}}) {
    const Rows in = make_rows<T>(rows, classes, unsigned(rows * 7 + classes));
    const auto tol = CrossEntropyBackwardOf<T>::dlogits_tolerance();
    for (const float g : {1.5f, kScale}) {
      const lab::Verdict v = check<T>(in, g, grads<T>(in, g), tol);
      EXPECT_TRUE(v.pass) << rows << "x" << classes << " dloss " << g << ": " << v.details();
    }
    const std::vector<float> d = grads<T>(in, kScale);
    EXPECT_GT(check<T>(in, kScale, d, tol).worst_share, kNear<T>) << rows << "x" << classes;
    // fp32's bound alone (the fp32 topic's) fails the same values: the rounding is the bound.
    EXPECT_FALSE(check<T>(in, kScale, d, CrossEntropyBackwardFp32::dlogits_tolerance()).pass)
        << rows << "x" << classes;
  }
}

TYPED_TEST(CrossEntropyBackward16BitCheck, OnePercentFails) {
  using T = TypeParam;
  const Rows in = make_rows<T>(64, 768, 17);
  const auto tol = CrossEntropyBackwardOf<T>::dlogits_tolerance();
  EXPECT_FALSE(
      check<T>(in, 1.5f, grads<T>(in, 1.5f, [](std::size_t i) { return i % 2 ? 1.01f : 1.f; }), tol).pass);
  // One element 1% off: each counted row's label entry, (p - 1) dloss / K, large against the bound's
  // absolute term (1% less the two roundings' 2^-7 is 0.22% of it).
  int tried = 0;
  for (int r = 0; r < in.rows; ++r) {
    if (in.labels[r] == CrossEntropyInputs::kIgnoreIndex) continue;
    const std::size_t k = std::size_t(r) * in.classes + in.labels[r];
    EXPECT_FALSE(check<T>(in, 1.5f, grads<T>(in, 1.5f, [k](std::size_t i) { return i == k ? 1.01f : 1.f; }), tol).pass)
        << "row " << r;
    ++tried;
  }
  EXPECT_GT(tried, 50);
}

// fp16 at 2048 rows of 2048 classes, dloss 1 (no loss scale): (softmax - onehot) / K is 1 / (C K)
// away from the label on average, 2^-22 here, and mostly far less, below fp16's normal range
// (2^-14) everywhere but at the labels: nearly all of dlogits rounds to zero or to a few subnormal
// steps of 2^-24, as PyTorch's fp16 gradient does. The correct gradient passes with the floor (each
// element's rounding errs by at most 2^-25 there) and fails without it: the whole-output bound,
// relative to a norm that only the label entries carry, cannot hold the underflow of the rest (on
// the CPU: an error of 2.2e-5 in L2 against 1.1e-5 without the floor, 7.2e-5 with it). Every
// second element 1% off still fails with it (1.6e-4 of error from the label entries alone).
TEST(CrossEntropyBackwardFp16Check, UnderflowIsHeldByTheFloorAndOnlyByIt) {
  using T = __half;
  const Rows in = make_rows<T>(2048, 2048, 23);
  const auto tol = CrossEntropyBackwardOf<T>::dlogits_tolerance();
  const std::vector<float> d = grads<T>(in, 1.f);
  std::size_t small = 0;
  for (const float v : d) small += std::fabs(v) < 0x1p-14f;
  EXPECT_GT(small, d.size() * 99 / 100) << "the shape no longer underflows: choose another";
  const lab::Verdict v = check<T>(in, 1.f, d, tol);
  EXPECT_TRUE(v.pass) << v.details();
  lab::Tolerance no_floor = tol;
  no_floor.atol -= lab::StorageOf<T>::kFloor;
  EXPECT_FALSE(check<T>(in, 1.f, d, no_floor, 0.0).pass) << "the floor is not needed here: the test shows nothing";
  EXPECT_FALSE(check<T>(in, 1.f, grads<T>(in, 1.f, [](std::size_t i) { return i % 2 ? 1.01f : 1.f; }), tol).pass);
}

}  // namespace
