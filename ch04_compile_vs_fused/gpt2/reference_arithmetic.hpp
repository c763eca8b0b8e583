// The scalar types the model's reference is written over (gpt2_reference.cpp), and their
// operations by overload: double (the reference value), float (an fp32 stand-in for a kernel) and
// Perturbed, Monte Carlo arithmetic (every operation's result times 1 + delta, delta uniform in
// [-k u, k u]: a correct rounding k = 1, a division 2, the GPU's 2-ulp exp, log, erf, tanh, sqrt 4).
// Also what the products and the kept values add to a step's rounding, as ModelOptions asks: tf32,
// 3xTF32, bf16 and e4m3 products for the fp32 stand-in, widened roundings for the Monte Carlo runs.
// Host code, included by gpt2_reference.cpp (and by its test, tests/cpu/reference_arithmetic_test.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "gpt2/gpt2_model.hpp"
#include "lab/monte_carlo.hpp"
#include "lab/verify.hpp"

namespace gpt2::arith {

// The Monte Carlo arithmetic itself (Perturbed, noise, the scalar types' operations) is the lab's
// (lab/monte_carlo.hpp); what follows is what the GPT-2 step's kernels add to it.
using namespace lab::mc;

inline thread_local bool mc_odd_run = false;

// k more roundings of x, for what a kernel computes in more steps than the formula here.
inline void widen(double&, double) {}
inline void widen(float&, double) {}
inline void widen(Perturbed& x, double k) {
  if (k == 0) skip_draw();  // a factor of exactly 1 (the products' and sums' widening in most precisions)
  else x.v *= noise(k);
}
// The linear layers' extra rounding (ModelOptions::product_error, sum_error), set by reference()
// for the run it makes.
inline thread_local double mc_product_error = 0, mc_sum_error = 0;
inline thread_local ModelOptions::Products float_products = ModelOptions::Products::fp32;

// Which of two equal forms a run computes (the odd Monte Carlo runs take the second).
inline bool second_form(double) { return false; }
inline bool second_form(float) { return false; }
inline bool second_form(Perturbed) { return mc_odd_run; }

// sum_i x[i * stride] and sum_i a[i sa] b[i sb], n terms.
template <class T>
T sum_(const T* x, std::size_t stride, std::size_t n) {
  T s = cst<T>(0);
  for (std::size_t i = 0; i < n; ++i) s = s + x[i * stride];
  return s;
}
template <class T>
T dot_(const T* a, std::size_t sa, const T* b, std::size_t sb, std::size_t n) {
  T s = cst<T>(0);
  for (std::size_t i = 0; i < n; ++i) s = s + a[i * sa] * b[i * sb];
  return s;
}
// x rounded to `bits` significant bits (8: bf16; 4: e4m3's), to nearest, ties to even, as
// __float2bfloat16 rounds (the exponent's range is fp32's: no overflow or subnormals modelled).
inline float round_significand(float x, int bits) {
  const int drop = 24 - bits;
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x), half = (1u << (drop - 1)) - 1 + ((b >> drop) & 1u);
  return std::bit_cast<float>((b + half) & ~((1u << drop) - 1));
}

// An operand's rounding (ModelOptions::operand_error): a function of the operand's value, as a
// rounding is. Two equal operands are rounded alike wherever they occur, so the errors of a sum
// whose terms repeat one value (a LayerNorm over one feature gives every token the same output, and
// then every token the same logits) add up rather than average out, as they do on the GPU. Each run
// draws the relative error of every value anew: 1 + delta, delta uniform in [-k u, k u], from a
// hash of the run (mc_run_key, set by expected()) and the value's magnitude to kShareBits
// significant bits: values that agree that far share an error. (A Monte Carlo run's values carry
// their own perturbations, some u; two values equal on the GPU almost always fall in one bucket.)
//
// Why 16 bits, and not the rounding's own precision (8 for bf16), as until session 32: values that
// differ within one bf16 cell round with different errors on the GPU (each its distance to the
// nearest grid point), where one error shared by the whole cell moves them alike. A softmax does
// not see such a move (it is blind to a shift of all its inputs), so with the logits of a first
// step, nearly equal along a row, the runs spread the head's gradients far less than the GPU's
// rounding moves them: with the logits alone rounded (ModelOptions::logits_in_bf16), its fp32
// stand-in was at 16 to 28 of their sigma at 4 tokens, over 3 seeds. Bucketed at 12, 16, 20 or 24
// bits: 3.7 to 5.2. A grid of the rounding's own spacing with a phase a run draws per binade, which
// reproduces a rounding's structure, did no better (12 to 37): its runs seldom split a tight
// cluster of logits across a grid point, which the one real grid did.
constexpr int kShareBits = 16;
inline thread_local std::uint64_t mc_run_key = 0;
inline double value_noise(double x, double k) {
  const std::uint32_t bucket = std::bit_cast<std::uint32_t>(round_significand(std::fabs(float(x)), kShareBits));
  std::uint64_t z = mc_run_key ^ (std::uint64_t(bucket) * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return 1 + k * u * (2 * (double(z >> 11) * 0x1p-53) - 1);
}
inline void round_operand(double&, double) {}
inline void round_operand(float&, double) {}
// In the fp32-freedom runs (Expected::freedom_*, mc_roundings_to_nearest), a rounding to `bits`
// significant bits (k = 2^(24 - bits): bf16's 2^16) is made as the fp32 stand-in makes it, to
// nearest, even; any other k is perturbed as in the other runs.
inline thread_local bool mc_roundings_to_nearest = false;
inline void round_operand(Perturbed& x, double k) {
  int e = 0;
  if (mc_roundings_to_nearest && std::frexp(k, &e) == 0.5 && e - 1 >= 1 && e - 1 <= 23) {
    x.v = round_significand(float(x.v), 24 - (e - 1));
    return;
  }
  x.v *= value_noise(x.v, k);
}

// dot_ with each operand rounded operand_error units (a function of its value), each product and
// each addition rounded a further product_error and sum_error units (Monte Carlo runs only: widen
// and round_operand do nothing to double and float). kRounded: the operands come rounded already
// (Operand, below), so the loop takes them as they are and draws the same perturbations.
template <class T, bool kRounded = false>
T widened_dot_(const T* a, std::size_t sa, const T* b, std::size_t sb, std::size_t n, double operand_error,
               double product_error, double sum_error) {
  if (operand_error == 0 && product_error == 0 && sum_error == 0) return dot_(a, sa, b, sb, n);
  T s = cst<T>(0);
  for (std::size_t i = 0; i < n; ++i) {
    T x = a[i * sa], y = b[i * sb];
    if (!kRounded && operand_error != 0) round_operand(x, operand_error), round_operand(y, operand_error);
    T p = x * y;
    widen(p, product_error);
    s = s + p;
    widen(s, sum_error);
  }
  return s;
}
// A matrix as the dot products below read it, its values rounded as operands (round_operand, k
// units). The rounding is a function of the value, so a value that enters many dot products (an
// M x K operand's each of a product's N columns) is rounded once, here, not once a dot product as
// widened_dot_ rounds: the same values bit for bit, at O(M K) roundings where that took O(M N K).
// (The bf16 checks' Monte Carlo runs spent most of their time there.) Only Perturbed rounds
// operands; for double and float, and where k is 0, an Operand is the values themselves.
template <class T>
class Operand {
 public:
  Operand(const T* x, std::size_t n, double k) : p_(x) {
    if constexpr (std::is_same_v<T, Perturbed>) {
      if (k != 0) {
        rounded_.assign(x, x + n);
        for (T& v : rounded_) round_operand(v, k);
        p_ = rounded_.data();
      }
    }
  }
  const T* data() const { return p_; }

 private:
  const T* p_;
  std::vector<T> rounded_;
};

// dot_ as a linear layer's matrix product computes it (ModelOptions::operand_error, product_error,
// sum_error), over operands that are Operands made with mc_operand_error.
inline thread_local double mc_operand_error = 0;
template <class T>
T product_dot_(const T* a, std::size_t sa, const T* b, std::size_t sb, std::size_t n) {
  return widened_dot_<T, true>(a, sa, b, sb, n, mc_operand_error, mc_product_error, mc_sum_error);
}
// dot_ as the attention's products compute it (ModelOptions::attention_operand_error, ...), over
// Operands made with mc_attention_operand_error.
inline thread_local double mc_attention_operand_error = 0, mc_attention_product_error = 0,
                           mc_attention_sum_error = 0;
template <class T>
T attention_dot_(const T* a, std::size_t sa, const T* b, std::size_t sb, std::size_t n) {
  return widened_dot_<T, true>(a, sa, b, sb, n, mc_attention_operand_error, mc_attention_product_error,
                               mc_attention_sum_error);
}

// x rounded to tf32 (10 mantissa bits), to nearest, ties away from zero: cvt.rna.tf32.f32.
inline float tf32(float x) {
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(x) + 0x1000u) & 0xffffe000u);
}
// A value a step keeps in bf16 (ModelOptions::hidden_in_bf16): the reference's exact, the Monte
// Carlo runs' perturbed by bf16's rounding (2^16 u, as a function of the value: round_operand),
// the fp32 stand-in's rounded to 8 bits.
inline void keep_in_bf16(double&) {}
inline void keep_in_bf16(float& x) { x = round_significand(x, 8); }
inline void keep_in_bf16(Perturbed& x) { round_operand(x, 0x1p16); }

// g - mean_g where g = dy w (the LayerNorm backward's): as written, or in the fp32 stand-in with
// ModelOptions::contracted, as one fused multiply-add (dy w unrounded), as nvcc contracts it.
inline thread_local bool float_contracted = false;
template <class T>
T centred_product(T, T, T g, T mean_g) {
  return g - mean_g;
}
inline float centred_product(float dy, float w, float g, float mean_g) {
  return float_contracted ? std::fma(dy, w, -mean_g) : g - mean_g;
}

// sum_i round(a_i) round(b_i), each operand rounded to `bits` significant bits, summed in fp32 first
// to last, or last to first (ModelOptions::sums_reversed: a second order of addition, for the tests).
inline thread_local bool float_sums_reversed = false;
inline float rounded_dot(const float* a, std::size_t sa, const float* b, std::size_t sb, std::size_t n, int bits) {
  float s = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = float_sums_reversed ? n - 1 - k : k;
    s += round_significand(a[i * sa], bits) * round_significand(b[i * sb], bits);
  }
  return s;
}

// The fp32 stand-in's product sums as ModelOptions::products asks.
template <>
inline float product_dot_<float>(const float* a, std::size_t sa, const float* b, std::size_t sb, std::size_t n) {
  using P = ModelOptions::Products;
  if (float_products == P::fp32) return dot_(a, sa, b, sb, n);
  if (float_products == P::bf16 || float_products == P::e4m3)
    return rounded_dot(a, sa, b, sb, n, float_products == P::bf16 ? 8 : 4);
  float s[3] = {0, 0, 0};
  for (std::size_t i = 0; i < n; ++i) {
    const float x = a[i * sa], y = b[i * sb], xb = tf32(x), yb = tf32(y);
    if (float_products == P::tf32) {
      s[2] += xb * yb;
      continue;
    }
    const float xs = tf32(x - xb), ys = tf32(y - yb);
    s[0] += xs * yb, s[1] += xb * ys, s[2] += xb * yb;
  }
  return s[0] + s[1] + s[2];
}

// The fp32 stand-in's attention products with every operand rounded to bf16 (Q, K, V, P, dO, dS:
// ModelOptions::attention_in_bf16), the sums in fp32, as the bf16 flash kernels' tensor cores take
// them; else fp32's own.
inline thread_local bool float_attention_bf16 = false;
template <>
inline float attention_dot_<float>(const float* a, std::size_t sa, const float* b, std::size_t sb, std::size_t n) {
  return float_attention_bf16 ? rounded_dot(a, sa, b, sb, n, 8) : dot_(a, sa, b, sb, n);
}

// While one lives, the linear layers' products are fp32's own (ModelOptions::head_in_fp32).
struct Fp32Products {
  double operand_error = mc_operand_error, product_error = mc_product_error, sum_error = mc_sum_error;
  ModelOptions::Products products = float_products;
  explicit Fp32Products(bool on) {
    if (on)
      mc_operand_error = 0, mc_product_error = 0, mc_sum_error = 0, float_products = ModelOptions::Products::fp32;
  }
  ~Fp32Products() {
    mc_operand_error = operand_error, mc_product_error = product_error, mc_sum_error = sum_error;
    float_products = products;
  }
  Fp32Products(const Fp32Products&) = delete;
  Fp32Products& operator=(const Fp32Products&) = delete;
};

}  // namespace gpt2::arith
