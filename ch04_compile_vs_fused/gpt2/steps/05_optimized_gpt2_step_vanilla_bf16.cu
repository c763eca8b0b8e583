// Vanilla, mixed precision: the vanilla step (baseline_gpt2_step.cu) as torch.autocast(bfloat16)
// runs it, still one kernel per operation. Every matrix product, the head's and the attention's
// included, takes bf16 operands on the tensor cores with fp32 accumulation; each operand is
// rounded to bf16 by a cast of its own just before its product, as autocast casts: the LayerNorms'
// outputs, Q, K, V, the probabilities P, the merged attention, the MLP's input to its second
// product; each weight once a step, in the forward (autocast's weight cache), kept for the
// backward; and in the backward every product's incoming gradient (dY, dO, dS). LayerNorm, the
// softmax and the loss run in fp32, as autocast runs them, and so do the residual stream, AdamW and
// the fp32 master parameters it updates. The MLP's pre-activation h (its product plus the bias) is
// kept in bf16, as autocast keeps it, and GELU and GELU's derivative are taken at that value.
// One choice differs from autocast: the products write fp32 where autocast writes bf16, so that the
// rounding is the operands' alone and the same check as the fused bf16 step's judges it (the
// variant declares "bf16+bf16-attention", gpt2::ModelOptions).
//
// Why it is faster than the vanilla step: the products, most of its FLOPs, run at the tensor
// cores' bf16 rate (about 775 TFLOP/s measured for cuBLAS on the H100, against SGEMM's 52), and
// the saved operands take half the memory. What it does not change is everything else: the
// launches, the element-wise and row passes and the T x T tensors, to which the casts add a
// pass for each operand. With the products fast, those passes are most of the step: the
// lesson of the next step (optimized_gpt2_step_fused_bf16.cu, the same arithmetic fused).
// lab-after: baseline_gpt2_step
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_vanilla_bf16
#include <algorithm>
#include <vector>

#include <cuda_bf16.h>

#include "attention/attention.cuh"
#include "gpt2/gpt2.cuh"
#include "gpt2/eager/gpt2_eager.cuh"
#include "gpt2/eager/schedule.cuh"

namespace {

namespace ops = gpt2::eager;
using Buffer = lab::DeviceBuffer<float>;
using Bf16Buffer = lab::DeviceBuffer<__nv_bfloat16>;

// What one block keeps for its backward (autograd's saved tensors under autocast): LayerNorm's
// input and statistics and the softmax's output in fp32; every product's operands in bf16 (the
// casts' outputs, weights included); the MLP's pre-activation in bf16.
struct Saved {
  Buffer x, mean1, rstd1, probs, mid, mean2, rstd2;
  Bf16Buffer ln1, q, k, v, p, att, ln2, h, act;
  Bf16Buffer qkv_w, proj_w, fc_w, fc2_w;
  Saved(const gpt2::Config& c, const attn::Dims& a)
      : x(c.tokens() * c.d), mean1(c.tokens()), rstd1(c.tokens()), probs(a.scores()), mid(x.size()),
        mean2(c.tokens()), rstd2(c.tokens()), ln1(x.size()), q(x.size()), k(x.size()), v(x.size()), p(a.scores()),
        att(x.size()), ln2(x.size()), h(4 * x.size()), act(h.size()), qkv_w(3 * std::size_t(c.d) * c.d),
        proj_w(std::size_t(c.d) * c.d), fc_w(4 * std::size_t(c.d) * c.d), fc2_w(fc_w.size()) {}
};

struct VanillaBf16 : gpt2::eager::Schedule<VanillaBf16, Saved> {
  Buffer meanf, rstdf, logits, logp;
  Bf16Buffer lnf, head_w;  // the head's operands
  // Scratch, reused by every block: an fp32 row operation's output before its cast, QKV, the
  // heads' P V, two T x T tensors, the MLP's product.
  Buffer tmp, qkv, heads, s1, s2, wide;
  // The backward's: the operations' gradients, in fp32, and the bf16 casts of those that flow into
  // products (up to the head's B T x V).
  Buffer dln, dpart, dhidden, dact, dqkv, dq, dk, dv, dheads;
  Bf16Buffer dy, dout, ds;

  static lab::Declared declared() { return {.precision = "bf16+bf16-attention"}; }

  explicit VanillaBf16(const Gpt2Step::Problem& p)
      : Schedule(p), meanf(rows), rstdf(rows), logits(c.tokens() * c.vocab), logp(logits.size()), lnf(out.size()),
        head_w(std::size_t(c.vocab) * d), tmp(out.size()), qkv(3 * out.size()), heads(out.size()), s1(a.scores()),
        s2(a.scores()), wide(4 * out.size()) {
    if (phase != gpt2::Phase::forward) {
      const std::size_t n = out.size();
      dln = Buffer(n), dpart = Buffer(n), dhidden = Buffer(4 * n), dact = Buffer(4 * n);
      dqkv = Buffer(3 * n), dq = Buffer(n), dk = Buffer(n), dv = Buffer(n), dheads = Buffer(n);
      dy = Bf16Buffer(c.tokens() * std::max<std::size_t>(4 * d, c.vocab)), dout = Bf16Buffer(n);
      ds = Bf16Buffer(a.scores());
    }
  }

  void head_forward(Gpt2Step::Problem& p, cudaStream_t stream) {
    const float* P = p.params.data();
    ops::layer_norm(out.data(), P + off.lnf_w, P + off.lnf_b, tmp.data(), meanf.data(), rstdf.data(), rows, d, stream);
    ops::to_bf16(tmp.data(), lnf.data(), out.size(), stream);                       // cast
    ops::to_bf16(P + off.head, head_w.data(), head_w.size(), stream);               // cast
    ops::linear(blas, lnf.data(), head_w.data(), logits.data(), rows, c.vocab, d);  // the head, no bias
    ops::log_softmax(logits.data(), logp.data(), rows, c.vocab, stream);            // in fp32
    ops::nll_loss(logp.data(), p.targets.data(), p.loss.data(), rows, c.vocab, stream);
  }

  void block_forward(const float* P, const gpt2::BlockOffsets& o, Saved& s, float* y, cudaStream_t stream) {
    const int hd = c.head_dim();
    const std::size_t n = out.size();
    // x + attention(ln1(x))
    ops::layer_norm(s.x.data(), P + o.ln1_w, P + o.ln1_b, tmp.data(), s.mean1.data(), s.rstd1.data(), rows, d,
                    stream);
    ops::to_bf16(tmp.data(), s.ln1.data(), n, stream);                           // cast
    ops::to_bf16(P + o.qkv_w, s.qkv_w.data(), s.qkv_w.size(), stream);           // cast
    ops::linear(blas, s.ln1.data(), s.qkv_w.data(), qkv.data(), rows, 3 * d, d);
    ops::add_bias(qkv.data(), P + o.qkv_b, rows, 3 * d, stream);
    Bf16Buffer* qkv_heads[] = {&s.q, &s.k, &s.v};
    for (int i = 0; i < 3; ++i) {
      ops::split_heads(qkv.data() + i * d, 3 * d, heads.data(), c.batch, c.context, c.heads, hd, stream);
      ops::to_bf16(heads.data(), qkv_heads[i]->data(), n, stream);  // cast
    }
    attn::gemm_nt(blas, a, 1.f, s.q.data(), s.k.data(), s1.data());          // S = Q K^T
    attn::scale(s1.data(), s2.data(), a.scores(), a.scale(), stream);        // S / sqrt(hd)
    attn::causal_mask(s2.data(), a, -INFINITY, stream);                      // masked_fill(-inf)
    attn::softmax_rows(s2.data(), s.probs.data(), nullptr, a.rows(), a.seq, stream);  // P, fp32 (saved)
    ops::to_bf16(s.probs.data(), s.p.data(), a.scores(), stream);            // cast (saved too)
    attn::gemm_nn(blas, a, 1.f, s.p.data(), s.v.data(), heads.data());       // P V
    ops::merge_heads(heads.data(), tmp.data(), d, c.batch, c.context, c.heads, hd, stream);
    ops::to_bf16(tmp.data(), s.att.data(), n, stream);                           // cast
    ops::to_bf16(P + o.proj_w, s.proj_w.data(), s.proj_w.size(), stream);        // cast
    ops::linear(blas, s.att.data(), s.proj_w.data(), tmp.data(), rows, d, d);
    ops::add_bias(tmp.data(), P + o.proj_b, rows, d, stream);
    ops::add(s.x.data(), tmp.data(), s.mid.data(), n, stream);
    // mid + mlp(ln2(mid))
    ops::layer_norm(s.mid.data(), P + o.ln2_w, P + o.ln2_b, tmp.data(), s.mean2.data(), s.rstd2.data(), rows, d,
                    stream);
    ops::to_bf16(tmp.data(), s.ln2.data(), n, stream);                           // cast
    ops::to_bf16(P + o.fc_w, s.fc_w.data(), s.fc_w.size(), stream);              // cast
    ops::linear(blas, s.ln2.data(), s.fc_w.data(), wide.data(), rows, 4 * d, d);
    ops::add_bias(wide.data(), P + o.fc_b, rows, 4 * d, stream);
    ops::to_bf16(wide.data(), s.h.data(), wide.size(), stream);  // h in bf16, as autocast's product writes it
    ops::gelu(s.h.data(), s.act.data(), s.h.size(), stream);     // bf16 in, bf16 out
    ops::to_bf16(P + o.fc2_w, s.fc2_w.data(), s.fc2_w.size(), stream);           // cast
    ops::linear(blas, s.act.data(), s.fc2_w.data(), tmp.data(), rows, d, 4 * d);
    ops::add_bias(tmp.data(), P + o.fc2_b, rows, d, stream);
    ops::add(s.mid.data(), tmp.data(), y, n, stream);
  }

  // A product's backward from its fp32 output gradient: the gradient cast, then the two products,
  // then the bias's gradient (none when db is null) from the fp32 gradient.
  void linear_backward(const float* dY, const __nv_bfloat16* X, const __nv_bfloat16* W, float* dX, float* dW,
                       float* db, int M, int N, int K, cudaStream_t stream) {
    ops::to_bf16(dY, dy.data(), std::size_t(M) * N, stream);  // cast
    ops::linear_backward(blas, dy.data(), X, W, dX, dW, M, N, K);
    if (db) ops::bias_backward(dY, db, M, N, stream);
  }

  void head_backward(Gpt2Step::Problem& p, cudaStream_t stream) {
    const float* P = p.params.data();
    float* G = p.grads.data();
    float* dz = logits.data();  // the logits are dead: their gradient takes their place
    ops::nll_loss_backward(p.targets.data(), dz, rows, c.vocab, stream);
    ops::log_softmax_backward(dz, logp.data(), rows, c.vocab, stream);
    linear_backward(dz, lnf.data(), head_w.data(), dln.data(), G + off.head, nullptr, rows, c.vocab, d, stream);
    ops::layer_norm_backward(dln.data(), out.data(), P + off.lnf_w, meanf.data(), rstdf.data(), dx.data(),
                             G + off.lnf_w, G + off.lnf_b, rows, d, stream);
  }

  // dx: the gradient of the block's output in, of its input out; the block's parameters' into G.
  void block_backward(const float* P, float* G, const gpt2::BlockOffsets& o, const Saved& s, cudaStream_t stream) {
    const int hd = c.head_dim();
    const std::size_t n = out.size();
    // The MLP: y = mid + fc2(gelu(fc(ln2(mid)))).
    linear_backward(dx.data(), s.act.data(), s.fc2_w.data(), dact.data(), G + o.fc2_w, G + o.fc2_b, rows, d, 4 * d,
                    stream);
    ops::gelu_backward(dact.data(), s.h.data(), dhidden.data(), 4 * n, stream);  // at the bf16 h
    linear_backward(dhidden.data(), s.ln2.data(), s.fc_w.data(), dln.data(), G + o.fc_w, G + o.fc_b, rows, 4 * d, d,
                    stream);
    ops::layer_norm_backward(dln.data(), s.mid.data(), P + o.ln2_w, s.mean2.data(), s.rstd2.data(), dpart.data(),
                             G + o.ln2_w, G + o.ln2_b, rows, d, stream);
    ops::add(dx.data(), dpart.data(), dx.data(), n, stream);  // d mid: the residual's two paths
    // The attention: mid = x + proj(attention(qkv(ln1(x)))).
    linear_backward(dx.data(), s.att.data(), s.proj_w.data(), dln.data(), G + o.proj_w, G + o.proj_b, rows, d, d,
                    stream);
    ops::split_heads(dln.data(), d, dheads.data(), c.batch, c.context, c.heads, hd, stream);
    ops::to_bf16(dheads.data(), dout.data(), n, stream);                           // cast
    attn::gemm_tn(blas, a, 1.f, s.p.data(), dout.data(), dv.data());              // dV = P^T dO
    attn::gemm_nt(blas, a, 1.f, dout.data(), s.v.data(), s1.data());              // dP = dO V^T
    attn::softmax_backward_rows(s.probs.data(), s1.data(), s2.data(), a.rows(), a.seq, stream);  // dS, fp32 P
    attn::causal_mask(s2.data(), a, 0.f, stream);                                  // masked_fill's backward
    attn::scale(s2.data(), s1.data(), a.scores(), a.scale(), stream);              // the scale's backward
    ops::to_bf16(s1.data(), ds.data(), a.scores(), stream);                        // cast
    attn::gemm_nn(blas, a, 1.f, ds.data(), s.k.data(), dq.data());                // dQ = dS K
    attn::gemm_tn(blas, a, 1.f, ds.data(), s.q.data(), dk.data());                // dK = dS^T Q
    ops::merge_heads(dq.data(), dqkv.data(), 3 * d, c.batch, c.context, c.heads, hd, stream);
    ops::merge_heads(dk.data(), dqkv.data() + d, 3 * d, c.batch, c.context, c.heads, hd, stream);
    ops::merge_heads(dv.data(), dqkv.data() + 2 * d, 3 * d, c.batch, c.context, c.heads, hd, stream);
    linear_backward(dqkv.data(), s.ln1.data(), s.qkv_w.data(), dln.data(), G + o.qkv_w, G + o.qkv_b, rows, 3 * d, d,
                    stream);
    ops::layer_norm_backward(dln.data(), s.x.data(), P + o.ln1_w, s.mean1.data(), s.rstd1.data(), dpart.data(),
                             G + o.ln1_w, G + o.ln1_b, rows, d, stream);
    ops::add(dx.data(), dpart.data(), dx.data(), n, stream);  // d x: the residual's two paths
  }
};

}  // namespace

LAB_VARIANT_CLASS_STEP(VanillaBf16, LAB_STEP,
                       "vanilla, mixed precision: the vanilla step under autocast's rules, one kernel per operation "
                       "(a cast pass for every product operand, bf16 tensor-core products with fp32 accumulation, "
                       "LayerNorm, softmax, loss and AdamW in fp32)");
