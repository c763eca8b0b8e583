// The check of the activations on 16-bit storage (bf16 and fp16, typed tests), checked both ways on
// the CPU (no GPU): over every value of the storage for x in [-12, 12], a correct kernel (the
// function in fp32, its result rounded to the nearest 16-bit value) passes the topics' bound, comes
// near it (the bound is the rounding's own, not a loose one), and a 1% error fails it, in every
// element or in one. In fp16 GELU's and Swish's far negative tail lies below fp16's normal range
// (|y| < 2^-14 from x = -4.5 on), where the check's absolute floor of 2^-25 holds the rounding, in
// each element and in the whole output's bound (an output of one such element: the checks' shape 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "activations.cuh"
#include "storages.hpp"

namespace {

// Every finite value of the 16-bit storage T in [lo, hi], as floats.
template <class T>
std::vector<float> values(float lo, float hi) {
  static_assert(sizeof(T) == 2);
  std::vector<float> out;
  for (std::uint32_t bits = 0; bits < (1u << 16); ++bits) {
    const std::uint16_t word = static_cast<std::uint16_t>(bits);
    T t;
    std::memcpy(static_cast<void*>(&t), &word, sizeof t);  // the bits as they are (T has no constructor from them)
    const float v = lab::to_f32(t);
    if (std::isfinite(v) && v >= lo && v <= hi) out.push_back(v);
  }
  return out;
}

template <class T>
float round_to(double v) {
  return storages::round_to<T>(float(v));
}

// The functions as a correct kernel computes them: in fp32 (the host's erfc and exp, within a few
// ulps of the device's), then the output rounded to bf16.
float gelu_fp32(float x) { return 0.5f * x * std::erfc(-x * 0.70710678118654752f); }
float gelu_grad_fp32(float x, float dy) {
  const float cdf = 0.5f * std::erfc(-x * 0.70710678118654752f);
  const float pdf = 0.39894228040143268f * std::exp(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}
float swish_fp32(float x) { return x / (1.f + std::exp(-x)); }
float swish_grad_fp32(float x, float dy) {
  const float s = 1.f / (1.f + std::exp(-x));
  return dy * (s * (1.f + x * (1.f - s)));
}

struct Case {
  std::vector<float> got;
  std::vector<double> ref;
};

// Forward (dy empty) or backward (dy the upstream gradient, values of T too).
template <class T, class F, class R>
Case make(const std::vector<float>& x, const std::vector<float>& dy, F kernel, R reference) {
  Case c;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float g = dy.empty() ? 1.f : dy[i];
    c.got.push_back(round_to<T>(kernel(x[i], g)));
    c.ref.push_back(reference(double(x[i]), double(g)));
  }
  return c;
}

template <class T>
std::vector<float> inputs() {
  return values<T>(-12.f, 12.f);
}
template <class T>
std::vector<float> upstream(std::size_t n) {
  std::vector<float> dy(n);
  for (std::size_t i = 0; i < n; ++i) dy[i] = round_to<T>(std::sin(0.37 * double(i)));  // in [-1, 1]
  return dy;
}

template <class T>
std::vector<Case> cases() {
  const std::vector<float> x = inputs<T>();
  const std::vector<float> dy = upstream<T>(x.size());
  return {
      make<T>(x, {}, [](float v, float) { return gelu_fp32(v); },
              [](double v, double) { return act::GeluOp::reference(v); }),
      make<T>(x, dy, gelu_grad_fp32, [](double v, double g) { return g * act::GeluOp::derivative(v); }),
      make<T>(x, {}, [](float v, float) { return swish_fp32(v); },
              [](double v, double) { return act::SwishOp::reference(v); }),
      make<T>(x, dy, swish_grad_fp32, [](double v, double g) { return g * act::SwishOp::derivative(v); }),
  };
}

template <class T>
class Activations16BitCheck : public ::testing::Test {};
TYPED_TEST_SUITE(Activations16BitCheck, storages::Both, storages::Name);

TYPED_TEST(Activations16BitCheck, CorrectRoundingPassesAndComesNearTheBound) {
  using S = act::Storage<TypeParam>;
  for (const Case& c : cases<TypeParam>()) {
    const lab::Verdict v = S::check(c.got, c.ref, S::tolerance(), "y");
    EXPECT_TRUE(v.pass) << v.details();
    // Half an ulp is reached where a value lies just above a power of two at a rounding midpoint:
    // the bound is what the rounding costs, not more.
    EXPECT_GT(v.worst_share, storages::kNear<TypeParam>) << v.summary();
  }
}

TYPED_TEST(Activations16BitCheck, Fp32BoundAloneFailsTheRounding) {
  // Without the rounding's share the bound is fp32's, which the rounded results exceed: the bound's
  // 16-bit part is needed, and is not a number that happened to pass.
  for (const Case& c : cases<TypeParam>())
    EXPECT_FALSE(lab::compare(c.got, c.ref, lab::Tolerance::fp32(), "y").pass);
}

TYPED_TEST(Activations16BitCheck, TheCheaperErfcPassesEveryInput) {
  // The 16-bit GELUs' final variants compute erfc with act::erfc_bf16 (a fit of 1.2e-7 relative
  // error) instead of erfcf: over every x of the storage in [-12, 12] (dy as above for the
  // gradient), their results rounded are held to the same bound, and come as near it as the
  // correct rounding does (the bound is the rounding's, which the fit's error hardly moves).
  using S = act::Storage<TypeParam>;
  const std::vector<float> x = inputs<TypeParam>();
  const std::vector<float> dy = upstream<TypeParam>(x.size());
  const act::GeluBf16Op op;
  const Case fwd = make<TypeParam>(x, {}, [&](float v, float) { return op(v); },
                                   [](double v, double) { return act::GeluOp::reference(v); });
  const Case bwd = make<TypeParam>(x, dy, [&](float v, float g) { return op(v, g); },
                                   [](double v, double g) { return g * act::GeluOp::derivative(v); });
  for (const Case* c : {&fwd, &bwd}) {
    const lab::Verdict v = S::check(c->got, c->ref, S::tolerance(), "y");
    EXPECT_TRUE(v.pass) << v.details();
    EXPECT_GT(v.worst_share, storages::kNear<TypeParam>) << v.summary();
  }
  // Before the rounding, the fit is within 1e-5 of the exact GELU (relative, where GELU is above
  // `tiny`) and its gradient within 1e-5 of the gradient's scale (absolute, |dy| <= 1: the gradient
  // crosses zero near x = -0.75, where a relative error means nothing). tiny: 1e-30 over bf16's x;
  // over fp16's finer grid of x the fit's relative error reaches 1.25e-5 beyond x = -11.38, where
  // GELU is below 3e-29, so there it is fp16's smallest value, 2^-24 (below it the output rounds
  // to 0 or 2^-24 whatever the fit; above it the fit is within 2.2e-6).
  constexpr double tiny = lab::StorageOf<TypeParam>::bf16 ? 1e-30 : 0x1p-24;
  int off = 0;
  float first = 0.f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double g = act::GeluOp::reference(x[i]);
    const bool bad = (std::fabs(g) > tiny && std::fabs(op(x[i]) - g) >= 1e-5 * std::fabs(g)) ||
                     std::fabs(op(x[i], 1.f) - act::GeluOp::derivative(x[i])) >= 1e-5;
    if (bad && off++ == 0) first = x[i];
  }
  EXPECT_EQ(off, 0) << "inputs past 1e-5, the first x = " << first;
}

TYPED_TEST(Activations16BitCheck, OnePercentFails) {
  // A kernel 1% off before its rounding (as tools/planted_bugs.sh plants it): the rounding can
  // take back at most half an ulp, 2^-8 of the value in bf16 (2^-11 in fp16), and 1% - 2^-8 is
  // above the bound, 2^-8 and fp32's 1e-5 (2^-11 and 1e-5), wherever the value is above 1e-2.
  using S = act::Storage<TypeParam>;
  for (const Case& c : cases<TypeParam>()) {
    std::vector<float> half = c.got;  // every second element
    for (std::size_t i = 1; i < half.size(); i += 2) half[i] = round_to<TypeParam>(1.01 * c.ref[i]);
    EXPECT_FALSE(S::check(half, c.ref, S::tolerance(), "y").pass);
    std::vector<std::size_t> large;  // one element, at 50 places spread over those above 1e-2
    for (std::size_t i = 0; i < c.ref.size(); ++i)
      if (std::fabs(c.ref[i]) > 1e-2) large.push_back(i);
    ASSERT_GT(large.size(), 1000u);
    for (int k = 0; k < 50; ++k) {
      const std::size_t i = large[k * (large.size() - 1) / 49];
      std::vector<float> one = c.got;
      one[i] = round_to<TypeParam>(1.01 * c.ref[i]);
      EXPECT_FALSE(S::check(one, c.ref, S::tolerance(), "y").pass) << "element " << i << ", ref " << c.ref[i];
    }
  }
}

TYPED_TEST(Activations16BitCheck, OneOutputBelowFp16sNormalRangePasses) {
  // An output of one element (the checks' shapes {1} and {3}) below fp16's normal range (|y| < 2^-14):
  // its correct rounding errs by up to 2^-25 absolutely, which is more than the relative L2 bound
  // (2^-11 + 1e-5) of |y| wherever |y| < 2^-14. S::check counts the floor in the whole output's bound
  // and passes every such output; the same tolerance without it rejects some (on the H200, seed 1's
  // one-element GELU gradient of 1.7e-5, rounded by 2.7e-8: 1.6e-3 of itself). A 1% error before the
  // rounding still fails wherever fp16's grid can show it: 1% - 2^-11 of |y| is above the bound's
  // 2^-11 |y| + 2 * 2^-25 (the rounding of the wrong value is the second 2^-25) from |y| = 2^-17.
  using S = act::Storage<TypeParam>;
  int checked = 0, without_floor = 0, planted = 0;
  for (const Case& c : cases<TypeParam>())
    for (std::size_t i = 0; i < c.ref.size(); ++i) {
      // Below 2^-126 lie bf16's own subnormals, where no topic's output falls (storage.hpp: bf16's
      // kFloor is 0); this test's every-value inputs reach them (x of 1e-40), the topics' do not.
      if (std::fabs(c.ref[i]) >= 0x1p-14 || std::fabs(c.ref[i]) < 0x1p-126) continue;
      const std::vector<float> got{c.got[i]};
      const std::vector<double> ref{c.ref[i]};
      ++checked;
      const lab::Verdict v = S::check(got, ref, S::tolerance(), "y");
      EXPECT_TRUE(v.pass) << v.details();
      without_floor += !lab::compare(got, ref, S::tolerance(), "y").pass;
      if (std::fabs(c.ref[i]) < 0x1p-17) continue;
      const std::vector<float> off{round_to<TypeParam>(1.01 * c.ref[i])};
      ++planted;
      EXPECT_FALSE(S::check(off, ref, S::tolerance(), "y").pass) << "ref " << c.ref[i] << ", 1% off " << off[0];
    }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(planted, 100);
  // bf16 has no floor (its values here are normal: the relative bound holds their rounding); fp16 needs it.
  if constexpr (lab::StorageOf<TypeParam>::fp16)
    EXPECT_GT(without_floor, 0);
  else
    EXPECT_EQ(without_floor, 0);
}

}  // namespace
