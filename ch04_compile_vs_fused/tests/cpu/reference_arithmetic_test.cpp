// The Monte Carlo arithmetic's shortcuts, which must leave a run's figures as they were, bit for
// bit: a matrix's operands rounded once (arith::Operand) where the dot products rounded each value
// at every product it entered, and a widening by 0 units (a factor of exactly 1) that advances the
// run's stream without computing its draw (lab::mc::skip_draw).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "gpt2/reference_arithmetic.hpp"
#include "lab/rng.hpp"

namespace {

using namespace gpt2::arith;

bool same(Perturbed a, Perturbed b) { return std::bit_cast<std::uint64_t>(a.v) == std::bit_cast<std::uint64_t>(b.v); }

// C = A B^T (M x N, K terms a dot product) under one run's stream and operand key, either way.
std::vector<Perturbed> product(const std::vector<Perturbed>& A, const std::vector<Perturbed>& B, int M, int N, int K,
                               double operand, double prod, double sum, bool once) {
  mc_state = 12345, mc_run_key = 678;
  std::vector<Perturbed> C(std::size_t(M) * N);
  if (once) {
    const Operand<Perturbed> a(A.data(), A.size(), operand), b(B.data(), B.size(), operand);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        C[std::size_t(i) * N + j] = widened_dot_<Perturbed, true>(a.data() + std::size_t(i) * K, 1,
                                                                  b.data() + std::size_t(j) * K, 1, K, operand, prod, sum);
  } else {
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        C[std::size_t(i) * N + j] = widened_dot_<Perturbed, false>(A.data() + std::size_t(i) * K, 1,
                                                                   B.data() + std::size_t(j) * K, 1, K, operand, prod, sum);
  }
  return C;
}

TEST(ReferenceArithmetic, OperandsRoundedOnceAreTheSameRun) {
  constexpr int M = 7, N = 5, K = 33;
  lab::Rng rng(3);
  std::vector<float> a(std::size_t(M) * K), b(std::size_t(N) * K);
  rng.normal(std::span<float>(a));
  rng.normal(std::span<float>(b));
  std::vector<Perturbed> A(a.begin(), a.end()), B(b.begin(), b.end());
  // bf16 operands with and without the products' and sums' own widening, and with the freedom runs'
  // roundings to nearest (mc_roundings_to_nearest).
  for (const bool nearest : {false, true})
    for (const double prod : {0.0, 2.0})
      for (const double sum : {0.0, 1.0}) {
        mc_roundings_to_nearest = nearest;
        const auto every = product(A, B, M, N, K, 0x1p16, prod, sum, false);
        const auto once = product(A, B, M, N, K, 0x1p16, prod, sum, true);
        for (std::size_t i = 0; i < every.size(); ++i)
          ASSERT_TRUE(same(every[i], once[i])) << "element " << i << " (nearest " << nearest << ", product " << prod
                                               << ", sum " << sum << "): " << every[i].v << " against " << once[i].v;
        // The operands' rounding is there to see: without it the run differs.
        const auto none = product(A, B, M, N, K, 0, prod, sum, true);
        std::size_t moved = 0;
        for (std::size_t i = 0; i < every.size(); ++i) moved += !same(every[i], none[i]);
        EXPECT_GT(moved, every.size() / 2);
      }
  mc_roundings_to_nearest = false;
}

// A draw whose factor is exactly 1 skipped: the next draws are those that follow the drawn one.
TEST(ReferenceArithmetic, SkippedDrawIsTheDrawnOne) {
  mc_state = 99;
  Perturbed x{1.25};
  x.v *= noise(0);
  const double next_drawn = noise(1);
  mc_state = 99;
  Perturbed y{1.25};
  widen(y, 0);
  EXPECT_TRUE(same(x, y));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(noise(1)), std::bit_cast<std::uint64_t>(next_drawn));
  // And a widening of k > 0 does draw: the value moves.
  Perturbed z{1.25};
  widen(z, 4);
  EXPECT_NE(z.v, 1.25);
}

}  // namespace
