// The attention reference itself (CPU only): its gradients against central differences of
// L = sum(O o dO), causal and not, so the GPU checks compare with a reference that is right.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attention/attention.cuh"
#include "lab/testing.hpp"

namespace {

double loss(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
            const std::vector<float>& dout, int seq, int d, bool causal) {
  const attn::HeadReference r = attn::reference_head(q.data(), k.data(), v.data(), nullptr, seq, d, causal);
  double l = 0;
  for (std::size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * dout[i];
  return l;
}

TEST(AttentionReference, GradientsMatchCentralDifferences) {
  const int seq = 5, d = 16;
  const std::size_t n = std::size_t(seq) * d;
  lab::Rng rng(lab::testing::run_seed());
  std::vector<float> q(n), k(n), v(n), dout(n);
  for (auto* x : {&q, &k, &v, &dout}) rng.uniform(*x, -1.f, 1.f);
  for (const bool causal : {false, true}) {
    const attn::HeadReference r = attn::reference_head(q.data(), k.data(), v.data(), dout.data(), seq, d, causal);
    // lse is the log of the softmax's denominator: exp(scale q.k_j - lse) sums to 1 over j.
    for (int i = 0; i < seq; ++i) {
      double sum = 0;
      for (int j = 0; j <= (causal ? i : seq - 1); ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += double(q[i * d + c]) * k[j * d + c];
        sum += std::exp(s / std::sqrt(double(d)) - r.lse[i]);
      }
      EXPECT_NEAR(sum, 1.0, 1e-12) << "row " << i;
    }
    // Perturb in float by h, so the difference quotient sees exactly the perturbation.
    const float h = 1.0f / 1024;
    for (auto [x, grad, name] : {std::tuple{&q, &r.dq, "dQ"}, std::tuple{&k, &r.dk, "dK"}, std::tuple{&v, &r.dv, "dV"}}) {
      for (std::size_t i = 0; i < n; ++i) {
        const float keep = (*x)[i];
        (*x)[i] = keep + h;
        const double up = loss(q, k, v, dout, seq, d, causal);
        (*x)[i] = keep - h;
        const double down = loss(q, k, v, dout, seq, d, causal);
        (*x)[i] = keep;
        EXPECT_NEAR((up - down) / (2.0 * h), (*grad)[i], 2e-6) << name << "[" << i << "] causal " << causal;
      }
    }
  }
}

}  // namespace
