// Scaled dot-product attention, one or more heads: for each batch b and head h, with Q, K, V of
// seq x d (row-major, [batch][heads][seq][d]) and scale = 1/sqrt(d),
//   S = scale Q K^T (seq x seq), P = softmax(S) row by row (causal: S[i][j] = -inf for j > i),
//   O = P V, and the log-sum-exp of each row, lse[i] = log sum_j exp(S[i][j]).
// Its backward, given dO: dV = P^T dO, dP = dO V^T, dS = P o (dP - rowsum(dP o P)),
// dQ = scale dS K, dK = scale dS^T Q.
//
// The chapter's question in its sharpest form. The minimum traffic is Q, K, V, O (and dO, dQ,
// dK, dV backward): O(seq d). Eager mode materializes S and P, seq x seq each, which at seq 16384
// is 1 GiB a head; a compiler of element-wise operations can fuse the scale and the mask into the
// softmax but not remove S and P, because the softmax needs a whole row of S before any of P, and
// that row is the output of a matrix product; only rewriting the algorithm (an online softmax over
// tiles of K and V, FlashAttention) keeps them on chip. Work: 4 B H seq^2 d FLOPs forward (two
// products of 2 seq^2 d each), half of that with the causal mask (the FlashAttention convention:
// the masked half is not computed), and 2.5 times the forward backward (five products).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include "lab/jit.hpp"
#include "lab/lab.hpp"

namespace attn {

// The shape of one attention problem; causal is a switch (0 or 1) carried in the shape.
struct Dims {
  int batch, heads, seq, d;
  bool causal;
  explicit Dims(const lab::Shape& s)
      : batch(int(s[0])), heads(int(s[1])), seq(int(s[2])), d(int(s[3])), causal(s[4] != 0) {}
  int bh() const { return batch * heads; }
  std::size_t elements() const { return std::size_t(bh()) * seq * d; }  // of Q (and K, V, O)
  std::size_t rows() const { return std::size_t(bh()) * seq; }          // of lse
  std::size_t scores() const { return std::size_t(bh()) * seq * seq; }  // of S and P
  float scale() const { return 1.0f / std::sqrt(float(d)); }
  // The fraction of S that is computed: 1, or (seq + 1) / (2 seq) with the causal mask.
  double computed_fraction() const { return causal ? (double(seq) + 1) / (2.0 * seq) : 1.0; }
};

struct Shapes {
  static constexpr int chapter = 4;
  static std::vector<std::string> dims() { return {"batch", "heads", "seq", "d", "causal"}; }
  static std::vector<std::string> switches() { return {"causal"}; }
  // The users' benchmark (batch 8, one head) at two lengths and both head sizes that matter, the
  // causal mask once, and the multi-head shapes the tensor-core targets name (16 heads).
  static std::vector<lab::Shape> sweep() {
    return {{8, 1, 1024, 64, 0}, {8, 1, 4096, 64, 0}, {8, 1, 4096, 128, 0}, {8, 1, 4096, 64, 1},
            {8, 16, 4096, 64, 0}, {8, 16, 4096, 128, 0}};
  }
  // Every d, seq below, at and off the 64-row tile, one row, several heads, causal on and off; the
  // last three are split by optimized_attention_fused_split (keys in chunks of 3, 1 and 1 tiles of
  // 128, ragged at seq, the causal ones' last chunks on the diagonal).
  static std::vector<lab::Shape> checks() {
    return {{1, 1, 1, 16, 0},   {1, 1, 1, 64, 1},    {2, 1, 77, 16, 1},    {1, 2, 130, 32, 0},
            {1, 1, 64, 32, 1},  {2, 1, 65, 64, 1},   {1, 1, 200, 64, 0},   {1, 2, 129, 128, 1},
            {1, 1, 64, 128, 0}, {1, 1, 300, 128, 0}, {1, 1, 1100, 64, 1},  {1, 1, 700, 128, 0},
            {1, 1, 900, 128, 1}};
  }
  // max_d: the widest head the caller's kernels take, 128 (the chapter's variants) or 256 (the
  // 16-bit kernels of flash_bf16.cuh, as the Python package runs them).
  static std::string validate(const lab::Shape& s, int max_d = 128) {
    const Dims a(s);
    const bool wide = max_d >= 256 && a.d == 256;
    if (a.d != 16 && a.d != 32 && a.d != 64 && a.d != 128 && !wide)
      return max_d >= 256 ? "d must be 16, 32, 64, 128 or 256" : "d must be 16, 32, 64 or 128";
    if (std::int64_t(s[0]) * s[1] > 65535) return "batch x heads at most 65535";
    if (s[2] > 65536) return "seq at most 65536";
    return double(a.elements()) >= double(std::int64_t{1} << 31) ? "batch x heads x seq x d below 2^31" : "";
  }
};

// How a variant's arithmetic rounds, for the reference's slack (see reference_head).
//   term: the relative error of each product of two inputs beyond fp32's own rounding: 0 for fp32
//         SIMT and cuBLAS, 16u for 3xTF32 (the small * small part dropped, the small parts rounded
//         to tf32: 3 2^-22 = 12u), 2^-8 for bf16 inputs (both operands rounded to 8 bits).
//   stored: the rounding of P and dS before their products (2^-9 for bf16; 0 when kept in fp32).
struct Precision {
  double term = 0, stored = 0;
  const char* name = "fp32";
  static Precision fp32() { return {16 * lab::fp32::kUnitRoundoff, 0, "fp32"}; }
  static Precision bf16() { return {0x1p-8, 0x1p-9, "bf16"}; }
};

// The reference, in double, for one head: o (seq x d) and lse (seq); with dout given, also dq, dk,
// dv. Inputs are the head's rows of Q, K, V (and dO), row-major. Beside each output, its slack: the
// error a correct kernel of that precision may make there, propagated through the algorithm:
//   S_ij = scale q_i . k_j errs by e_S = (sum_error(d + 2) + term) scale sum_c |q_ic k_jc|;
//   lse_i by max_j e_S + the sum of exp's error (seq positive terms; exp2/__expf within 8u and
//   argument roundings of 3 (|m| + A) u, A the row's range; online rescales whose arguments
//   telescope to A), P_ij relatively by rho_i = 2 max_j e_S + that;
//   O_ic = sum_j P_ij V_jc by (rho_i + stored + term + sum_error(seq + 1)) sum_j P_ij |V_jc|;
//   backward: dP_ij = dO_i . V_j, delta_i = rowsum(dO o O) (or of dP o P), dS = scale P (dP - delta),
//   each with its sum's error and the errors it inherits, and dV, dQ, dK as sums over seq of those.
struct HeadReference {
  std::vector<double> o, lse, dq, dk, dv;
  std::vector<double> o_slack, lse_slack, dq_slack, dk_slack, dv_slack;
};
HeadReference reference_head(const float* q, const float* k, const float* v, const float* dout, int seq, int d,
                             bool causal, Precision prec = Precision::fp32());

// The bf16 backward as its kernels round, emulated in double: the check that a 1% error in a
// gradient cannot pass. Precision::bf16()'s slack allows every product its bf16 rounding whatever
// its sign; for dK and dQ, sums whose terms cancel, that is more than 1% of the value, so a kernel
// 1% off passes it. Emulating the rounding points removes what they cost from the comparison:
//   Q, K, V and dO rounded to bf16 (nearest, even); lse and delta = rowsum(dO o O) from the eager
//   fp32 forward of the fp32 inputs (attn::SavedOutput); S = Q K^T and dP = dO V^T summed in fp32 on
//   the tensor cores; P = exp2(S scale log2 e - lse log2 e); dS = P (dP - delta) from that unrounded
//   P; P and dS rounded to bf16 (nearest, even) before dV = P^T dO, dK = dS^T Q and dQ = dS K,
//   summed in fp32, dK and dQ then scaled.
// These are the rounding points of flash_bf16.cuh's mma.sync kernel and backward_wgmma.cuh's wgmma
// kernel: a variant that declares "bf16" for the backward declares them. What a correct kernel may
// still differ by is its fp32 arithmetic: the sums (the tensor cores' accumulation truncates),
// exp2's approximation, the fp32 forward's lse and delta, and the P and dS whose fp32 value lies
// near a point halfway between two bf16 values, which then round the other way (a "flip": one bf16
// spacing of that element).
// Each is modelled by its variance, errors as independent (random inputs, of random sign) and each
// rounding's as large as u of the partial result it rounds rather than uniform within it (3 times
// the variance); a tensor-core step (16 products and the accumulator) by 20 truncations of up to
// 2u of its largest addend. The flips by their probability under that model (a Gaussian error
// against the distance to the midpoint). The sums' share of a gradient's squared L2 distance from
// the emulation is their variance; the flips' share is bounded as a sum of independent rare
// events (a Chernoff bound, exceeded with probability 1e-9: a few flips of large elements, or many
// of small ones). A kernel passes when its L2 distance from the emulation is within
// kBf16EmulationFactor = 2 (as FlashAttention-3's tests hold their kernels to twice a reference
// implementation's error) times the square root of their sum. Where a few likely flips dominate (a
// head of a few keys, one P a few percent likely to flip), that sum lets one flip count four times
// over; there the allowance is the tighter of it and a second bound: twice the sums' square root
// plus the flips' norm bounded by the triangle inequality, each flip its exact move sqrt(w), their
// sum bounded as above (exceeded with probability 1e-9). At the check shapes a 1% error in half
// of a gradient's elements is at least 3.8 allowances away, in half of O's at least 14.9, and the
// fp32 stand-in of the kernels' arithmetic (tests/cpu/attention_reference_test.cpp) within 0.18 of
// one. In a head of few keys a 1% error can pass: a row then sums a few terms, and one P or dS that
// may flip moves the row by one bf16 spacing of a term (0.4% to 0.8% of it), as far as the 1% error
// in half the row moves it; the allowance, which must let that flip happen, cannot tell them apart.
// dK and dQ are sums whose terms cancel, so a flip there weighs more against 1% of the value; under
// the causal mask the last keys' rows of dK and dV sum a few queries at any length. Measured over
// 3600 seeds (86400 random shapes, tests/cpu/attention_reference_test.cpp's draw: seeds 20000 to
// 22399 and 40000 to 41199, 2026-12-05): a 1% error in half of a gradient's elements passed at heads
// of 1 to 3 keys (401 of 2694 such shape-gradients, 394 of them at 1 key), and was at least 1.29
// allowances away from 4 keys (seed 20040, 5x32 causal) and 1.38 from 8 (seed 21626, 14x16 causal;
// under the first bound alone it passed at up to 49 keys and was 1.16 away from 64); in half of O's
// it was at least 4.59 away at every head, 1 key included, but seed 11661 (outside the sweep) holds
// one at 3x16 only 1.98 away (0.96 under the first bound): far below a sweep's minimum, rare heads
// remain. The stand-ins came within 0.980 of their allowances (the first bound alone: 0.495): where
// one flip decides, the second bound is that flip's exact move plus twice the sums' standard
// deviation, so a flip that happens in the stand-in brings it near the bound by design. Hence the
// limits below, from which the random-shape test asserts that a 1% error fails, with a margin for
// such heads: a gradient's from 32 keys (at least 1.63 away there, at 150x64; seed 20144's 49x16,
// which passed under the first bound alone, is 1.78 away), O's from 4 (at least 3.67 over 1200 seeds
// more, 60000 to 61199). The check shapes' heads have 1 key, where no P can flip, or 64 and more.
//
// One gradient's model, over one head or several (+=): the sums' variance, and each possible
// flip's probability p and the w it adds to the squared distance if it happens.
struct Bf16Moment {
  double sums = 0;
  std::vector<double> flip_p, flip_w;
  Bf16Moment& operator+=(const Bf16Moment& o);
  // The second moment allowed: the sums' variance, and the flips' sum of w as a Chernoff bound puts
  // it, exceeded with probability at most 1e-9 (flips independent: min over theta > 0 of
  // (log 1e9 + sum log(1 + p (exp(theta w) - 1))) / theta).
  double value() const;
  // The flips' L2 norm, as the sum of the moves sqrt(w) of those that happen (the triangle
  // inequality: flips of one row add as vectors), bounded the same way.
  double flips_norm() const;
};
struct Bf16Emulation {
  std::vector<double> dq, dk, dv;
  Bf16Moment dq_moment, dk_moment, dv_moment;
};
inline constexpr double kBf16EmulationFactor = 2;
inline constexpr int kKeysToTellA1PercentError = 32;    // a gradient's, as measured (above)
inline constexpr int kKeysToTellA1PercentErrorInO = 4;   // O's, as measured (above)
// A gradient's L2 distance from its emulated values, and what the model allows it: the lesser of
// kBf16EmulationFactor sqrt(model.value()) and kBf16EmulationFactor sqrt(model.sums) +
// model.flips_norm(). It passes when distance <= allowed.
struct Bf16Distance {
  double distance = 0, allowed = 0;
  double share() const { return distance / allowed; }
  bool pass() const { return distance <= allowed; }  // false for NaN
};
Bf16Distance bf16_emulation_distance(std::span<const float> got, std::span<const double> emulated,
                                     const Bf16Moment& model);
Bf16Emulation emulate_bf16_backward(const float* q, const float* k, const float* v, const float* dout, int seq, int d,
                                    bool causal);

// The bf16 forwards likewise: P = exp2(S scale log2 e - m) rounded to bf16 before P V, where m is
// the row's running maximum, which the online softmax updates once a tile of keys; so the emulation
// needs each variant's tiles (lab::Declared::schedule, a ForwardSchedule in std::any). key_tile:
// keys a tile, counted from each chunk's first key. A row's keys are one chunk, or, where
// chunk_starts has an entry for the row's tile of query_tile rows, chunks from those keys, each
// normalised by its own sum and then combined (lse = log sum_c exp(lse_c); O = sum_c exp(lse_c -
// lse) O_c: the split step).
struct ForwardSchedule {
  explicit ForwardSchedule(int keys = 64) : key_tile(keys) {}
  int key_tile;
  int query_tile = 0;
  std::vector<std::vector<int>> chunk_starts;  // by query tile; empty: every row one chunk
  std::vector<int> chunks_of(int row) const;   // the first key of each of row's chunks
};
// The rest as the backward's: S = Q K^T from the bf16 inputs on the tensor cores; the tile's maximum
// of S times scale log2 e rounded to fp32; P = exp2(fma(S, scale log2 e, -m)) in fp32, summed
// unrounded into l (fp32), rounded to bf16 into O's accumulator (the tensor cores), which is rescaled
// by exp2(m_old - m_new) as l is; O = acc / l. Its model: O's sums, l's error (all of a row's O
// alike), the combine's roundings, and the flips of P.
struct Bf16ForwardEmulation {
  std::vector<double> o;
  Bf16Moment o_moment;
};
Bf16ForwardEmulation emulate_bf16_forward(const float* q, const float* k, const float* v, int seq, int d, bool causal,
                                          const ForwardSchedule& schedule);
// Inputs shared by both directions, drawn from the Rng: uniform in [-1, 1].
struct Inputs {
  Dims dims;
  lab::DeviceBuffer<float> q, k, v;
  Inputs(const lab::Shape& s, lab::Rng& rng);
};

// The arithmetic a variant declares (lab::Declared::precision): "fp32" and "3xtf32" are modelled by
// Precision::fp32(), "bf16" by Precision::bf16(); nullopt for a name the reference does not know.
std::optional<Precision> precision_named(const std::string& name);

// Pieces of variant state that several variants hold (each variant holds its own, made in its
// prepare step; the Problem holds none of them).

// bf16 copies of the inputs, and of dO for the backward: a tensor-core variant's converted inputs
// (untimed, as a bf16 model holds its activations in bf16).
struct Bf16Inputs {
  lab::DeviceBuffer<__nv_bfloat16> q, k, v, dout;
  Bf16Inputs(const Inputs& in, cudaStream_t stream, const float* dout = nullptr);
};

// The eager and compiled variants' two seq x seq tensors a head: S and P forward, dP and dS
// backward (1 GiB a head each at seq 16384: what fusion removes).
struct Seq2Buffers {
  lab::DeviceBuffer<float> first, second;
  explicit Seq2Buffers(const Dims& a) : first(a.scores()), second(a.scores()) {}
};

// What the eager forward leaves for the eager backward: P (seq^2 a head), computed by the eager
// forward in the backward variant's prepare step.
struct SavedProbs {
  lab::DeviceBuffer<float> probs;
  SavedProbs(cublasHandle_t blas, const Inputs& in, cudaStream_t stream);
};

// What a fused forward leaves for the fused backward: O and the log-sum-exp, computed in the
// prepare step through the eager forward a group of heads at a time with a scratch that is freed
// afterwards (the device memory peak is reset after it: peak_MiB is the backward's own), and the
// row sums delta, computed by prologue() in the timed region.
struct SavedOutput {
  lab::DeviceBuffer<float> o, lse, delta;
  SavedOutput(const Inputs& in, cudaStream_t stream);
  // The fused backward's first steps: delta = rowsum(dO o O), and dQ zeroed for its atomics.
  void prologue(const Dims& a, const float* dout, float* dq, cudaStream_t stream);
};

// The eager (vanilla) forward, in the order PyTorch runs the textbook attention: cuBLAS S = Q K^T
// into `scores`, one element-wise kernel for the scale (into `probs`), one for the causal mask (in
// place), a row-softmax kernel (into `scores`, which then holds P), cuBLAS O = P V. The backward
// variants run it in their prepare step to make the state the backward reads (P, or O and lse);
// baseline_attention.cu spells the same operators out, as its lesson. `lse` may be null (eager
// mode does not keep it). Both scratch buffers hold bh x seq^2.
void eager_forward(cublasHandle_t blas, const Dims& a, const float* q, const float* k, const float* v, float* scores,
                   float* probs, float* o, float* lse, cudaStream_t stream);

// cuBLAS products over the bh heads (strided batched, fp32 arithmetic, no TF32), row-major:
//   nt: C (seq x seq) = alpha A B^T     for A, B seq x d     (S = Q K^T, dP = dO V^T)
//   nn: C (seq x d)   = alpha P X       for P seq x seq      (O = P V, dQ = dS K)
//   tn: C (seq x d)   = alpha P^T X                          (dV = P^T dO, dK = dS^T Q)
void gemm_nt(cublasHandle_t blas, const Dims& a, float alpha, const float* A, const float* B, float* C);
void gemm_nn(cublasHandle_t blas, const Dims& a, float alpha, const float* P, const float* X, float* C);
void gemm_tn(cublasHandle_t blas, const Dims& a, float alpha, const float* P, const float* X, float* C);
// The same products with bf16 operands, as torch.autocast(bfloat16) runs them: tensor cores, fp32
// accumulation and an fp32 output (autocast's is bf16; see gpt2_eager.cuh's bf16 linear).
void gemm_nt(cublasHandle_t blas, const Dims& a, float alpha, const __nv_bfloat16* A, const __nv_bfloat16* B, float* C);
void gemm_nn(cublasHandle_t blas, const Dims& a, float alpha, const __nv_bfloat16* P, const __nv_bfloat16* X,
             float* C);
void gemm_tn(cublasHandle_t blas, const Dims& a, float alpha, const __nv_bfloat16* P, const __nv_bfloat16* X,
             float* C);

// Eager's element-wise kernels, exposed for the backward: out = in * scale (16-byte accesses), and
// the causal mask, s[i][j] = fill above the diagonal of every seq x seq matrix (-inf forward; 0
// for the masked_fill's backward).
void scale(const float* in, float* out, std::size_t n, float scale, cudaStream_t stream);
void causal_mask(float* s, const Dims& a, float fill, cudaStream_t stream);

// Eager's softmax over `rows` rows of `cols`: p = exp(s - max) / sum, a block a row (one read for
// the running max and sum, a second, from L2, for the output). lse[row] = max + log(sum) unless
// lse is null. -inf entries give 0.
void softmax_rows(const float* s, float* p, float* lse, std::size_t rows, int cols, cudaStream_t stream);

// Its backward: ds = p o (dp - rowsum(p o dp)), a block a row (eager autograd's softmax backward).
void softmax_backward_rows(const float* p, const float* dp, float* ds, std::size_t rows, int cols,
                           cudaStream_t stream);

// out[m] = in[m] transposed, for `matrices` row-major rows x cols bf16 matrices; out's rows are
// rows_padded long, zero past `rows` (the tensor-core forward's V^T, in whole 64-key tiles).
void transpose_bf16(const __nv_bfloat16* in, __nv_bfloat16* out, int matrices, int rows, int cols, int rows_padded,
                    cudaStream_t stream);

// out = in rounded to bf16 (round to nearest even).
void to_bf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t stream);

// What the compiled variants hand to lab::jit's row kernels: the softmax's prologue (scale s, and
// -inf above the diagonal when causal) and the softmax backward's epilogue (scale g, and 0 above
// the diagonal). demo_jit --attention prints the kernels they become.
inline lab::jit::Expr compiled_prologue(float scale, bool causal) {
  using lab::jit::Expr;
  const Expr s = Expr::input(0) * scale;
  return causal ? select(Expr::col() > Expr::row(), -INFINITY, s) : s;
}
inline lab::jit::Expr compiled_epilogue(float scale, bool causal) {
  using lab::jit::Expr;
  const Expr g = Expr::input(0) * scale;
  return causal ? select(Expr::col() > Expr::row(), 0.0f, g) : g;
}

// The compiled variants' row kernel for this shape (the softmax with compiled_prologue, or its
// backward with compiled_epilogue), built on first use (NVRTC or lab::jit's cache) and kept: one
// per (operation, d, causal), as the scale is a constant of the generated source.
const lab::jit::RowKernel& compiled_row_kernel(lab::jit::RowOp op, const Dims& a);

// Puts the cuBLAS handle on the stream, in fp32 arithmetic (no TF32, whatever the environment).
void use_stream(cublasHandle_t blas, cudaStream_t stream);

}  // namespace attn

struct Attention : attn::Shapes {
  static constexpr const char* name = "attention";
  static lab::Work work(const lab::Shape& s) {
    const attn::Dims a(s);
    return {.bytes = 4.0 * (4.0 * double(a.elements()) + double(a.rows())),
            .flops = 4.0 * a.bh() * double(a.seq) * a.seq * a.d * a.computed_fraction()};
  }

  // O always; lse from the variants that declare it (.writes = {"lse"}: the fused ones).
  struct Problem : lab::Problem, attn::Inputs {
    lab::DeviceBuffer<float> o, lse;
    Problem(const lab::Shape& s, lab::Rng& rng) : attn::Inputs(s, rng), o(dims.elements()), lse(dims.rows()) {}
    void poison(cudaStream_t s) override {
      lab::poison(o, s);
      lab::poison(lse, s);
    }
    lab::Verdict verify() override;
  };
};

struct AttentionBackward : attn::Shapes {
  static constexpr const char* name = "attention_backward";
  static lab::Work work(const lab::Shape& s) {
    const attn::Dims a(s);
    // Read Q, K, V, O, dO and lse; write dQ, dK, dV.
    return {.bytes = 4.0 * (8.0 * double(a.elements()) + double(a.rows())),
            .flops = 2.5 * 4.0 * a.bh() * double(a.seq) * a.seq * a.d * a.computed_fraction()};
  }

  // What the forward left for the backward (eager mode's P, or the fused forward's O and lse) is
  // each variant's own state (attn::SavedProbs, attn::SavedOutput), made in its prepare step.
  struct Problem : lab::Problem, attn::Inputs {
    lab::DeviceBuffer<float> dout, dq, dk, dv;
    Problem(const lab::Shape& s, lab::Rng& rng);
    void poison(cudaStream_t s) override {
      lab::poison(dq, s);
      lab::poison(dk, s);
      lab::poison(dv, s);
    }
    lab::Verdict verify() override;
  };
};
