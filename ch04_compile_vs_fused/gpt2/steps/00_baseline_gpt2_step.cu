// Vanilla: the GPT-2 training step as an eager framework runs it, one kernel per operation
// (eager/gpt2_eager.cuh is its operator library, attention's operators are the chapter's own, and
// eager/schedule.cuh the order of the work, which the compiled and vanilla bf16 steps share: this
// file writes a block's forward and backward and the head's). A block
// forward is 22 launches: LayerNorm; the QKV product, its bias, three copies into heads; Q K^T, the
// scale, the mask, the softmax, P V, the heads merged back; the projection, its bias, the residual;
// LayerNorm; the MLP's product, bias, GELU, product, bias, residual. The backward is about 35 more, and
// the optimizer one launch per parameter tensor (148 for the small model). Every operation reads
// its inputs from device memory and writes its output back, and autograd keeps what its backward
// needs: per block the input, both LayerNorms' outputs, Q, K, V, the T x T probabilities of every
// head, the merged attention, the residual between, the MLP's hidden layer before and after GELU.
// The head's logits and their log-softmax are B T x V each (the softmax materialised).
//
// The products run on cuBLAS in fp32 (no TF32) and are most of the FLOPs; what the optimized
// variants remove is the rest: the launches, and the traffic of the element-wise and row
// operations and of the T x T tensors.
// Run: make ch04 && ./ch04_compile_vs_fused/baseline_gpt2_step
#include <vector>

#include "attention/attention.cuh"
#include "gpt2/gpt2.cuh"
#include "gpt2/eager/gpt2_eager.cuh"
#include "gpt2/eager/schedule.cuh"

namespace {

namespace ops = gpt2::eager;
using Buffer = lab::DeviceBuffer<float>;

// What one block keeps for its backward (autograd's saved tensors).
struct Saved {
  Buffer x, ln1, mean1, rstd1, q, k, v, probs, att, mid, ln2, mean2, rstd2, fc, act;
  Saved(const gpt2::Config& c, const attn::Dims& a)
      : x(c.tokens() * c.d), ln1(x.size()), mean1(c.tokens()), rstd1(c.tokens()), q(x.size()), k(x.size()),
        v(x.size()), probs(a.scores()), att(x.size()), mid(x.size()), ln2(x.size()), mean2(c.tokens()),
        rstd2(c.tokens()), fc(4 * x.size()), act(fc.size()) {}
};

struct Eager : gpt2::eager::Schedule<Eager, Saved> {
  gpt2::eager::Fp32Head head;  // the final LayerNorm, the head, the loss
  // Scratch, reused by every block: QKV, the heads' P V, two T x T tensors, a product's output.
  Buffer qkv, heads, s1, s2, tmp;
  // The backward's: the operations' gradients.
  Buffer dln, dpart, dhidden, dact, dqkv, dq, dk, dv, dheads;

  explicit Eager(const Gpt2Step::Problem& p)
      : Schedule(p), head(c), qkv(3 * out.size()), heads(out.size()), s1(a.scores()), s2(a.scores()), tmp(out.size()) {
    if (phase != gpt2::Phase::forward) {
      const std::size_t n = out.size();
      dln = Buffer(n), dpart = Buffer(n), dhidden = Buffer(4 * n), dact = Buffer(4 * n);
      dqkv = Buffer(3 * n), dq = Buffer(n), dk = Buffer(n), dv = Buffer(n), dheads = Buffer(n);
    }
  }

  void head_forward(Gpt2Step::Problem& p, cudaStream_t stream) { head.forward(blas, c, off, p, out.data(), stream); }

  void block_forward(const float* P, const gpt2::BlockOffsets& o, Saved& s, float* y, cudaStream_t stream) {
    const int hd = c.head_dim();
    // x + attention(ln1(x))
    ops::layer_norm(s.x.data(), P + o.ln1_w, P + o.ln1_b, s.ln1.data(), s.mean1.data(), s.rstd1.data(), rows, d,
                    stream);
    ops::linear(blas, s.ln1.data(), P + o.qkv_w, qkv.data(), rows, 3 * d, d);
    ops::add_bias(qkv.data(), P + o.qkv_b, rows, 3 * d, stream);
    ops::split_heads(qkv.data(), 3 * d, s.q.data(), c.batch, c.context, c.heads, hd, stream);
    ops::split_heads(qkv.data() + d, 3 * d, s.k.data(), c.batch, c.context, c.heads, hd, stream);
    ops::split_heads(qkv.data() + 2 * d, 3 * d, s.v.data(), c.batch, c.context, c.heads, hd, stream);
    attn::gemm_nt(blas, a, 1.f, s.q.data(), s.k.data(), s1.data());          // S = Q K^T
    attn::scale(s1.data(), s2.data(), a.scores(), a.scale(), stream);        // S / sqrt(hd)
    attn::causal_mask(s2.data(), a, -INFINITY, stream);                      // masked_fill(-inf)
    attn::softmax_rows(s2.data(), s.probs.data(), nullptr, a.rows(), a.seq, stream);  // P (saved)
    attn::gemm_nn(blas, a, 1.f, s.probs.data(), s.v.data(), heads.data());   // P V
    ops::merge_heads(heads.data(), s.att.data(), d, c.batch, c.context, c.heads, hd, stream);
    ops::linear(blas, s.att.data(), P + o.proj_w, tmp.data(), rows, d, d);
    ops::add_bias(tmp.data(), P + o.proj_b, rows, d, stream);
    ops::add(s.x.data(), tmp.data(), s.mid.data(), out.size(), stream);
    // mid + mlp(ln2(mid))
    ops::layer_norm(s.mid.data(), P + o.ln2_w, P + o.ln2_b, s.ln2.data(), s.mean2.data(), s.rstd2.data(), rows, d,
                    stream);
    ops::linear(blas, s.ln2.data(), P + o.fc_w, s.fc.data(), rows, 4 * d, d);
    ops::add_bias(s.fc.data(), P + o.fc_b, rows, 4 * d, stream);
    ops::gelu(s.fc.data(), s.act.data(), s.fc.size(), stream);
    ops::linear(blas, s.act.data(), P + o.fc2_w, tmp.data(), rows, d, 4 * d);
    ops::add_bias(tmp.data(), P + o.fc2_b, rows, d, stream);
    ops::add(s.mid.data(), tmp.data(), y, out.size(), stream);
  }

  void head_backward(Gpt2Step::Problem& p, cudaStream_t stream) {
    head.backward(blas, c, off, p, out.data(), dln.data(), dx.data(), stream);
  }

  // dx: the gradient of the block's output in, of its input out; the block's parameters' into G.
  void block_backward(const float* P, float* G, const gpt2::BlockOffsets& o, const Saved& s, cudaStream_t stream) {
    const int hd = c.head_dim();
    const std::size_t n = out.size();
    // The MLP: y = mid + fc2(gelu(fc(ln2(mid)))).
    ops::linear_backward(blas, dx.data(), s.act.data(), P + o.fc2_w, dact.data(), G + o.fc2_w, G + o.fc2_b, rows, d,
                         4 * d, stream);
    ops::gelu_backward(dact.data(), s.fc.data(), dhidden.data(), 4 * n, stream);
    ops::linear_backward(blas, dhidden.data(), s.ln2.data(), P + o.fc_w, dln.data(), G + o.fc_w, G + o.fc_b, rows,
                         4 * d, d, stream);
    ops::layer_norm_backward(dln.data(), s.mid.data(), P + o.ln2_w, s.mean2.data(), s.rstd2.data(), dpart.data(),
                             G + o.ln2_w, G + o.ln2_b, rows, d, stream);
    ops::add(dx.data(), dpart.data(), dx.data(), n, stream);  // d mid: the residual's two paths
    // The attention: mid = x + proj(attention(qkv(ln1(x)))).
    ops::linear_backward(blas, dx.data(), s.att.data(), P + o.proj_w, dln.data(), G + o.proj_w, G + o.proj_b, rows, d,
                         d, stream);
    ops::split_heads(dln.data(), d, dheads.data(), c.batch, c.context, c.heads, hd, stream);
    attn::gemm_tn(blas, a, 1.f, s.probs.data(), dheads.data(), dv.data());        // dV = P^T dO
    attn::gemm_nt(blas, a, 1.f, dheads.data(), s.v.data(), s1.data());            // dP = dO V^T
    attn::softmax_backward_rows(s.probs.data(), s1.data(), s2.data(), a.rows(), a.seq, stream);  // dS
    attn::causal_mask(s2.data(), a, 0.f, stream);                                  // masked_fill's backward
    attn::scale(s2.data(), s1.data(), a.scores(), a.scale(), stream);              // the scale's backward
    attn::gemm_nn(blas, a, 1.f, s1.data(), s.k.data(), dq.data());                // dQ = dS K
    attn::gemm_tn(blas, a, 1.f, s1.data(), s.q.data(), dk.data());                // dK = dS^T Q
    ops::merge_heads(dq.data(), dqkv.data(), 3 * d, c.batch, c.context, c.heads, hd, stream);
    ops::merge_heads(dk.data(), dqkv.data() + d, 3 * d, c.batch, c.context, c.heads, hd, stream);
    ops::merge_heads(dv.data(), dqkv.data() + 2 * d, 3 * d, c.batch, c.context, c.heads, hd, stream);
    ops::linear_backward(blas, dqkv.data(), s.ln1.data(), P + o.qkv_w, dln.data(), G + o.qkv_w, G + o.qkv_b, rows,
                         3 * d, d, stream);
    ops::layer_norm_backward(dln.data(), s.x.data(), P + o.ln1_w, s.mean1.data(), s.rstd1.data(), dpart.data(),
                             G + o.ln1_w, G + o.ln1_b, rows, d, stream);
    ops::add(dx.data(), dpart.data(), dx.data(), n, stream);  // d x: the residual's two paths
  }
};

}  // namespace

LAB_VARIANT_CLASS(Eager, baseline,
                  "vanilla: one kernel per operation (cuBLAS products, separate bias, GELU, residual, LayerNorm "
                  "kernels; T x T attention scores; materialised log-softmax; per-tensor AdamW)");
