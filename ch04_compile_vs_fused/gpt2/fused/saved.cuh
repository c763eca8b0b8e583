// What the fused GPT-2 steps keep for their backward, and where: each block's saved tensors
// (Saved) and the head's (HeadSaved), carved from memory that the step places (FusedStep::place_saved
// in step.cuh, from gpt2::plan_saved: mostly in the part of the gradients' buffer that the backward
// has not yet written).
#pragma once

#include <cstddef>
#include <type_traits>

#include "gpt2/fused/kernels.cuh"
#include "gpt2/gpt2.cuh"

namespace {

// Tensors carved one after another from memory at `at` (null: only counting), each 256-byte aligned;
// `used` counts floats (the gradients' buffer, where most of them lie, is in floats).
struct Carver {
  float* at;
  std::size_t used = 0;
  template <class T = float>
  T* take(std::size_t n) {
    T* p = at ? reinterpret_cast<T*>(at + used) : nullptr;
    used += (n * sizeof(T) + 255) / 256 * 64;
    return p;
  }
};

// What one block keeps for its backward: no T x T tensor; the log-sum-exp of each head row instead.
// Q, K, V by head, heads padded to the flash width (or the QKV product's rows, where the attention
// reads them so), in the attention's type (A); the merged attention output, a product's operand,
// and the MLP's pre-activation (4 d values a token, the largest tensor kept), in the products' type
// (P); the residual stream (both LayerNorms' inputs)
// with their means and rstds in fp32. Not kept: GELU's output, which the backward makes again from
// the pre-activation, and (unless KeepLn) the LayerNorms' outputs, which the backward makes again
// from their inputs, means and rstds (the same values, one pass each: in fp32 it reads what it
// would read back; in P bf16 it reads twice the bytes it would read back, plus its write, which
// optimized_gpt2_step_fused_bf16_keep_ln.cu trades for their memory: KeepLn keeps them, ln1 and
// ln2, in P). Carved from memory the step places (see FusedStep::place_saved).
template <class P, class A, bool KeepLn = false>
struct Saved {
  float *x, *mean1, *rstd1, *lse, *mid, *mean2, *rstd2;
  P *att, *h, *w;  // w: the block's parameters in P, when P is not float (null when it is)
  P *ln1 = nullptr, *ln2 = nullptr;  // the LayerNorms' outputs (KeepLn)
  A *q, *k, *v;
  Saved(const gpt2::Config& c, Carver& m) {
    const std::size_t n = c.tokens() * c.d, t = c.tokens(), nh = heads_size(c);
    w = std::is_same_v<P, float> ? nullptr : m.take<P>(gpt2::stage_begin(c, 1) - gpt2::stage_begin(c, 0));
    x = m.take(n), mean1 = m.take(t), rstd1 = m.take(t);
    // Q, K and V in one region: by head, one after another; or (an attention that reads them from
    // the QKV product's rows, policy::ReadsQkvRows) those rows, 3 d values a token, from q.
    q = m.take<A>(3 * nh), k = q ? q + nh : nullptr, v = q ? k + nh : nullptr;
    lse = m.take(t * c.heads), att = m.take<P>(n);
    mid = m.take(n), mean2 = m.take(t), rstd2 = m.take(t), h = m.take<P>(4 * n);
    if constexpr (KeepLn) ln1 = m.take<P>(n), ln2 = m.take<P>(n);
  }
  static std::size_t floats(const gpt2::Config& c) {
    Carver m{nullptr};
    static_cast<void>(Saved(c, m));
    return m.used;
  }
};

// What the head keeps: the last block's output (the final LayerNorm's input, its output made again
// as a block's are, or kept in P: KeepLn), the logits in L, fp32 or bf16 (which the loss kernel
// overwrites with their gradient where it writes the gradient in L), and its stage's parameters in
// P when P is not float.
template <class P, class L = float, bool KeepLn = false>
struct HeadSaved {
  float *out = nullptr, *meanf = nullptr, *rstdf = nullptr;
  P* ln = nullptr;  // the final LayerNorm's output (KeepLn)
  L* logits = nullptr;
  P* w = nullptr;
  HeadSaved() = default;
  HeadSaved(const gpt2::Config& c, Carver& m) : HeadSaved(c, m, m, c.tokens()) {}
  // The final LayerNorm's outputs (out, meanf, rstdf: written by the last block's last pass) from
  // `early`, the weights' copy and the logits (made after it) from `late`: the forward alone
  // carves `late` over the block's tensors, which are dead by then, and makes the logits a slice
  // of `logit_rows` rows at a time (FusedStep::place_saved, head_slice_rows).
  HeadSaved(const gpt2::Config& c, Carver& early, Carver& late, std::size_t logit_rows) {
    const std::size_t n = c.tokens() * c.d, t = c.tokens();
    if (!std::is_same_v<P, float>) w = late.take<P>(gpt2::param_count(c) - gpt2::stage_begin(c, c.layers));
    out = early.take(n), meanf = early.take(t), rstdf = early.take(t), logits = late.take<L>(logit_rows * c.vocab);
    if constexpr (KeepLn) ln = early.take<P>(n);
  }
  static std::size_t floats(const gpt2::Config& c) {
    Carver m{nullptr};
    static_cast<void>(HeadSaved(c, m));
    return m.used;
  }
};

// The forward alone's saved tensors in one buffer (FusedStep::place_saved): one block's, which every
// block reuses, and the head's, laid out by gpt2::plan_forward_saved from these types' sizes (the
// head's kept part, the final LayerNorm's outputs, first; the block's tensors and the head's late
// part, its weights' copy and logits of logit_rows rows, both after it). forward_saved says where,
// forward_carvers gives the three Carvers over memory at those offsets.
template <class Block, class Head>
gpt2::ForwardSaved forward_saved(const gpt2::Config& c, std::size_t logit_rows) {
  Carver block{nullptr}, kept{nullptr}, late{nullptr};
  static_cast<void>(Block(c, block));
  static_cast<void>(Head(c, kept, late, logit_rows));
  return gpt2::plan_forward_saved(block.used, kept.used, late.used);
}
struct ForwardCarvers {
  Carver kept, block, late;
};
inline ForwardCarvers forward_carvers(const gpt2::ForwardSaved& at, float* memory) {
  return {Carver{memory + at.kept}, Carver{memory + at.block}, Carver{memory + at.late}};
}

}  // namespace
