// Compiled: the vanilla step as a compiler of element-wise operations leaves it (lab::jit, the
// lab's torch.compile; read it against baseline_gpt2_step.cu). Every chain of element-wise
// operations between two products becomes one generated kernel: the projections' bias and the
// residual add (x + (y + b)), the MLP's bias and GELU (the bias applied again in the backward's
// GELU gradient rather than a biased copy kept), the attention's scale and causal mask fused into
// the softmax's reads and into its backward's write (the chapter's compiled attention). A block's
// forward drops from 22 launches to 15, and the T x T passes of the scale and the mask are gone in
// both directions. The optimizer stays vanilla's AdamW, a launch a tensor, as torch.compile(model)
// leaves torch.optim.AdamW eager: lab::jit would write it as three kernels over the flat buffer (a
// generated kernel has one output: m, then v, then the parameters, 10 floats moved a parameter
// against 7), which measured 31.7 ms against vanilla's 24.9 at the 2.7B model.
//
// Where lab::jit stops, and hand fusion (optimized_gpt2_step_fused.cu) goes on: it generates
// element-wise kernels with one output, and row kernels for the softmax only. So LayerNorm and the
// loss's log-softmax stay the eager kernels (a row reduction it cannot write), the heads are still
// laid out by copy kernels (a change of layout is not element-wise), the bias gradients are still
// column sums, and S and P stay T x T: fusing through the softmax needs the online softmax of flash attention,
// another algorithm rather than a better compiler.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_compiled
#include <cmath>
#include <vector>

#include "attention/attention.cuh"
#include "gpt2/gpt2.cuh"
#include "gpt2/eager/gpt2_eager.cuh"
#include "gpt2/eager/schedule.cuh"
#include "lab/jit.hpp"

namespace {

namespace ops = gpt2::eager;
using Buffer = lab::DeviceBuffer<float>;
using lab::jit::Expr;

// The generated kernels' expressions: in<k> is the k-th element-wise input, vec<k>[col] the k-th
// vector broadcast along the rows.
const Expr in0 = Expr::input(0), in1 = Expr::input(1);
const Expr vec0 = Expr::column(0);
const float kRsqrt2 = float(M_SQRT1_2), kRsqrt2Pi = float(0.5 * M_2_SQRTPI * M_SQRT1_2);

Expr gelu(const Expr& x) { return 0.5f * x * (1.0f + erf(x * kRsqrt2)); }
Expr gelu_grad(const Expr& x) { return 0.5f * (1.0f + erf(x * kRsqrt2)) + x * (exp(-0.5f * x * x) * kRsqrt2Pi); }

lab::jit::Kernel build(const Expr& e, const char* name) {
  return lab::jit::Kernel::build(e, lab::jit::Cache::global(), name);
}

// What one block keeps for its backward: the vanilla step's tensors, but fc is the MLP's product
// before its bias (the generated GELU kernels add it as they read).
struct Saved {
  Buffer x, ln1, mean1, rstd1, q, k, v, probs, att, mid, ln2, mean2, rstd2, fc, act;
  Saved(const gpt2::Config& c, const attn::Dims& a)
      : x(c.tokens() * c.d), ln1(x.size()), mean1(c.tokens()), rstd1(c.tokens()), q(x.size()), k(x.size()),
        v(x.size()), probs(a.scores()), att(x.size()), mid(x.size()), ln2(x.size()), mean2(c.tokens()),
        rstd2(c.tokens()), fc(4 * x.size()), act(fc.size()) {}
};

struct Compiled : gpt2::eager::Schedule<Compiled, Saved> {
  gpt2::eager::Fp32Head head;  // the final LayerNorm, the head, the loss
  // Scratch, reused by every block: QKV, the heads' P V, two T x T tensors, a product's output.
  Buffer qkv, heads, s1, s2, tmp;
  // The backward's: the operations' gradients.
  Buffer dln, dpart, dhidden, dact, dqkv, dq, dk, dv, dheads;
  // The generated kernels (NVRTC, or the cache, before timing): x + (y + b); gelu(h + b) and its
  // gradient. The attention's softmax and its backward, with the scale and the mask, are the
  // chapter's compiled attention kernels.
  lab::jit::Kernel residual_bias, bias_gelu, bias_gelu_backward;
  const lab::jit::RowKernel& softmax;
  const lab::jit::RowKernel& softmax_backward;

  explicit Compiled(const Gpt2Step::Problem& p)
      : Schedule(p), head(c), qkv(3 * out.size()), heads(out.size()), s1(a.scores()), s2(a.scores()),
        tmp(out.size()),
        residual_bias(build(in0 + (in1 + vec0), "residual_bias")),
        bias_gelu(build(gelu(in0 + vec0), "bias_gelu")),
        bias_gelu_backward(build(in0 * gelu_grad(in1 + vec0), "bias_gelu_backward")),
        softmax(attn::compiled_row_kernel(lab::jit::RowOp::softmax, a)),
        softmax_backward(attn::compiled_row_kernel(lab::jit::RowOp::softmax_backward, a)) {
    if (phase != gpt2::Phase::forward) {
      const std::size_t n = out.size();
      dln = Buffer(n), dpart = Buffer(n), dhidden = Buffer(4 * n), dact = Buffer(4 * n);
      dqkv = Buffer(3 * n), dq = Buffer(n), dk = Buffer(n), dv = Buffer(n), dheads = Buffer(n);
    }
  }

  // The head and the loss as vanilla's: LayerNorm and the log-softmax are row reductions lab::jit
  // does not write.
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
    softmax.launch(s1.data(), nullptr, s.probs.data(), a.rows(), a.seq, a.seq, stream);  // P, scaled, masked (saved)
    attn::gemm_nn(blas, a, 1.f, s.probs.data(), s.v.data(), heads.data());   // P V
    ops::merge_heads(heads.data(), s.att.data(), d, c.batch, c.context, c.heads, hd, stream);
    ops::linear(blas, s.att.data(), P + o.proj_w, tmp.data(), rows, d, d);
    residual_bias.launch({s.x.data(), tmp.data()}, {P + o.proj_b}, s.mid.data(), out.size(), d, stream);
    // mid + mlp(ln2(mid))
    ops::layer_norm(s.mid.data(), P + o.ln2_w, P + o.ln2_b, s.ln2.data(), s.mean2.data(), s.rstd2.data(), rows, d,
                    stream);
    ops::linear(blas, s.ln2.data(), P + o.fc_w, s.fc.data(), rows, 4 * d, d);
    bias_gelu.launch({s.fc.data()}, {P + o.fc_b}, s.act.data(), s.fc.size(), 4 * d, stream);
    ops::linear(blas, s.act.data(), P + o.fc2_w, tmp.data(), rows, d, 4 * d);
    residual_bias.launch({s.mid.data(), tmp.data()}, {P + o.fc2_b}, y, out.size(), d, stream);
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
    bias_gelu_backward.launch({dact.data(), s.fc.data()}, {P + o.fc_b}, dhidden.data(), 4 * n, 4 * d, stream);
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
    softmax_backward.launch(s.probs.data(), s1.data(), s2.data(), a.rows(), a.seq, a.seq, stream);  // dS, scaled+masked
    attn::gemm_nn(blas, a, 1.f, s2.data(), s.k.data(), dq.data());                // dQ = dS K
    attn::gemm_tn(blas, a, 1.f, s2.data(), s.q.data(), dk.data());                // dK = dS^T Q
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

LAB_VARIANT_CLASS_STEP(Compiled, LAB_STEP,
                       "compiled: lab::jit generates the bias+residual, bias+GELU and scaled, masked softmax "
                       "kernels around the same cuBLAS products; LayerNorm, the loss and AdamW stay eager");
