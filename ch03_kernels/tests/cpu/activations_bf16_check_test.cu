// The check of the activations on bf16 storage, checked both ways on the CPU (no GPU): over every
// bf16 value of x in [-12, 12], a correct kernel (the function in fp32, its result rounded to the
// nearest bf16) passes the topics' bound, comes near it (the bound is the rounding's own, not a
// loose one), and a 1% error fails it, in every element or in one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "activations.cuh"

namespace {

using S = act::Storage<__nv_bfloat16>;

// Every finite bf16 value in [lo, hi], as floats.
std::vector<float> bf16_values(float lo, float hi) {
  std::vector<float> out;
  for (std::uint32_t bits = 0; bits < (1u << 16); ++bits) {
    const std::uint32_t word = bits << 16;
    float v;
    std::memcpy(&v, &word, sizeof v);
    if (std::isfinite(v) && v >= lo && v <= hi) out.push_back(v);
  }
  return out;
}

float round_bf16(double v) { return __bfloat162float(__float2bfloat16_rn(float(v))); }

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

// Forward (dy empty) or backward (dy the upstream gradient, bf16 values too).
template <class F, class R>
Case make(const std::vector<float>& x, const std::vector<float>& dy, F kernel, R reference) {
  Case c;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float g = dy.empty() ? 1.f : dy[i];
    c.got.push_back(round_bf16(kernel(x[i], g)));
    c.ref.push_back(reference(double(x[i]), double(g)));
  }
  return c;
}

std::vector<Case> cases() {
  const std::vector<float> x = bf16_values(-12.f, 12.f);
  std::vector<float> dy(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) dy[i] = round_bf16(std::sin(0.37 * double(i)));  // in [-1, 1]
  return {
      make(x, {}, [](float v, float) { return gelu_fp32(v); },
           [](double v, double) { return act::GeluOp::reference(v); }),
      make(x, dy, gelu_grad_fp32, [](double v, double g) { return g * act::GeluOp::derivative(v); }),
      make(x, {}, [](float v, float) { return swish_fp32(v); },
           [](double v, double) { return act::SwishOp::reference(v); }),
      make(x, dy, swish_grad_fp32, [](double v, double g) { return g * act::SwishOp::derivative(v); }),
  };
}

TEST(ActivationsBf16Check, CorrectRoundingPassesAndComesNearTheBound) {
  for (const Case& c : cases()) {
    const lab::Verdict v = lab::compare(c.got, c.ref, S::tolerance(), "y");
    EXPECT_TRUE(v.pass) << v.details();
    // Half a bf16 ulp is reached where a value lies just above a power of two at a rounding
    // midpoint: the bound is what the rounding costs, not more.
    EXPECT_GT(v.worst_share, 0.9) << v.summary();
  }
}

TEST(ActivationsBf16Check, TheCheaperErfcPassesEveryInput) {
  // The bf16 GELUs' final variants compute erfc with act::erfc_bf16 (a fit of 1.2e-7 relative
  // error) instead of erfcf: over every bf16 x in [-12, 12] (dy as above for the gradient), their
  // results rounded to bf16 are held to the same bound, and come as near it as the correct
  // rounding does (the bound is the rounding's, which the fit's error hardly moves).
  const std::vector<float> x = bf16_values(-12.f, 12.f);
  std::vector<float> dy(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) dy[i] = round_bf16(std::sin(0.37 * double(i)));
  const act::GeluBf16Op op;
  const Case fwd = make(x, {}, [&](float v, float) { return op(v); },
                        [](double v, double) { return act::GeluOp::reference(v); });
  const Case bwd = make(x, dy, [&](float v, float g) { return op(v, g); },
                        [](double v, double g) { return g * act::GeluOp::derivative(v); });
  for (const Case* c : {&fwd, &bwd}) {
    const lab::Verdict v = lab::compare(c->got, c->ref, S::tolerance(), "y");
    EXPECT_TRUE(v.pass) << v.details();
    EXPECT_GT(v.worst_share, 0.9) << v.summary();
  }
  // Before the rounding, the fit is within 1e-5 of the exact GELU (relative, where GELU is above
  // 1e-30) and its gradient within 1e-5 of the gradient's scale (absolute, |dy| <= 1: the gradient
  // crosses zero near x = -0.75, where a relative error means nothing).
  int off = 0;
  float first = 0.f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double g = act::GeluOp::reference(x[i]);
    const bool bad = (std::fabs(g) > 1e-30 && std::fabs(op(x[i]) - g) >= 1e-5 * std::fabs(g)) ||
                     std::fabs(op(x[i], 1.f) - act::GeluOp::derivative(x[i])) >= 1e-5;
    if (bad && off++ == 0) first = x[i];
  }
  EXPECT_EQ(off, 0) << "inputs past 1e-5, the first x = " << first;
}

TEST(ActivationsBf16Check, OnePercentFails) {
  // A kernel 1% off before its rounding (as tools/planted_bugs.sh plants it): the rounding can
  // take back at most half an ulp, 2^-8 of the value, and 1% - 2^-8 is above the bound wherever
  // the value is above 1e-2 (there the 1e-5 of fp32's atol is a small part of the bound).
  for (const Case& c : cases()) {
    std::vector<float> half = c.got;  // every second element
    for (std::size_t i = 1; i < half.size(); i += 2) half[i] = round_bf16(1.01 * c.ref[i]);
    EXPECT_FALSE(lab::compare(half, c.ref, S::tolerance(), "y").pass);
    std::vector<std::size_t> large;  // one element, at 50 places spread over those above 1e-2
    for (std::size_t i = 0; i < c.ref.size(); ++i)
      if (std::fabs(c.ref[i]) > 1e-2) large.push_back(i);
    ASSERT_GT(large.size(), 1000u);
    for (int k = 0; k < 50; ++k) {
      const std::size_t i = large[k * (large.size() - 1) / 49];
      std::vector<float> one = c.got;
      one[i] = round_bf16(1.01 * c.ref[i]);
      EXPECT_FALSE(lab::compare(one, c.ref, S::tolerance(), "y").pass) << "element " << i << ", ref " << c.ref[i];
    }
  }
}

}  // namespace
