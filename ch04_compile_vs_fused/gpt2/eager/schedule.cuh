// The vanilla GPT-2 step's schedule, written once for the three steps that run the model a kernel
// an operation: baseline_gpt2_step, optimized_gpt2_step_compiled and optimized_gpt2_step_vanilla_bf16.
// The forward: the embeddings, the blocks in order, the head and the loss; the backward: the head's,
// the blocks in reverse, the embeddings'; then AdamW a tensor at a time (torch.optim.AdamW with
// foreach=False, as torch.compile(model) leaves the optimizer: eager). A step supplies only what
// differs between the three, which is its lesson: what a block keeps for its backward (its Saved
// type), a block's forward and backward, and the head's.
//
//   struct Eager : gpt2::eager::Schedule<Eager, Saved> {
//     void block_forward(const float* P, const gpt2::BlockOffsets&, Saved&, float* y, cudaStream_t);
//     void block_backward(const float* P, float* G, const gpt2::BlockOffsets&, const Saved&, cudaStream_t);
//     void head_forward(Gpt2Step::Problem&, cudaStream_t);   // from `out`: the loss
//     void head_backward(Gpt2Step::Problem&, cudaStream_t);  // into `dx`: the last block's output's gradient
//   };
// (Fp32Head below is the head of the two fp32 steps; the bf16 step writes its own, with its casts.)
#pragma once

#include <vector>

#include "attention/attention.cuh"
#include "gpt2/eager/gpt2_eager.cuh"
#include "gpt2/gpt2.cuh"

namespace gpt2::eager {

// The head and the loss as an eager framework runs them in fp32 (the vanilla and compiled steps'):
// the final LayerNorm, the head's product, the log-softmax materialised (B T x V), the NLL loss;
// backward, the loss's and the log-softmax's gradients in the logits' place, the head's product's,
// the LayerNorm's into dx. `out` is the last block's output, dln scratch of B T x d.
struct Fp32Head {
  lab::DeviceBuffer<float> lnf, meanf, rstdf, logits, logp;
  explicit Fp32Head(const gpt2::Config& c)
      : lnf(c.tokens() * c.d), meanf(c.tokens()), rstdf(c.tokens()), logits(c.tokens() * c.vocab),
        logp(logits.size()) {}

  void forward(cublasHandle_t blas, const gpt2::Config& c, const gpt2::Offsets& off, Gpt2Step::Problem& p,
               const float* out, cudaStream_t stream) {
    const float* P = p.params.data();
    const int rows = int(c.tokens()), d = c.d;
    layer_norm(out, P + off.lnf_w, P + off.lnf_b, lnf.data(), meanf.data(), rstdf.data(), rows, d, stream);
    linear(blas, lnf.data(), P + off.head, logits.data(), rows, c.vocab, d);  // the head, no bias
    log_softmax(logits.data(), logp.data(), rows, c.vocab, stream);          // B T x V, materialised
    nll_loss(logp.data(), p.targets.data(), p.loss.data(), rows, c.vocab, stream);
  }

  void backward(cublasHandle_t blas, const gpt2::Config& c, const gpt2::Offsets& off, Gpt2Step::Problem& p,
                const float* out, float* dln, float* dx, cudaStream_t stream) {
    const float* P = p.params.data();
    float* G = p.grads.data();
    const int rows = int(c.tokens()), d = c.d;
    float* dz = logits.data();  // the logits are dead: their gradient takes their place
    nll_loss_backward(p.targets.data(), dz, rows, c.vocab, stream);
    log_softmax_backward(dz, logp.data(), rows, c.vocab, stream);
    linear_backward(blas, dz, lnf.data(), P + off.head, dln, G + off.head, nullptr, rows, c.vocab, d,
                    stream);  // the head has no bias
    layer_norm_backward(dln, out, P + off.lnf_w, meanf.data(), rstdf.data(), dx, G + off.lnf_w, G + off.lnf_b, rows,
                        d, stream);
  }
};

template <class Step, class Saved>
struct Schedule {
  using Topic = Gpt2Step;
  using Buffer = lab::DeviceBuffer<float>;
  gpt2::Config c;
  gpt2::Phase phase;
  gpt2::Offsets off;
  std::vector<gpt2::Tensor> tensors;
  attn::Dims a;  // the heads: B x h x T x hd, causal
  int rows, d;   // B T positions, d_model
  lab::CublasHandle blas;
  // Saved tensors: every block's for a backward; the forward alone reuses one block's.
  std::vector<Saved> blocks;
  Buffer out;  // the last block's output: the final LayerNorm's input
  Buffer dx;   // the backward's running gradient of the residual stream

  explicit Schedule(const Gpt2Step::Problem& p)
      : c(p.cfg), phase(p.phase), off(gpt2::offsets(c)), tensors(gpt2::layout(c)),
        a(lab::Shape{c.batch, c.heads, c.context, c.head_dim(), 1}), rows(int(c.tokens())), d(c.d),
        out(c.tokens() * d) {
    const int kept = phase == gpt2::Phase::forward ? 1 : c.layers;
    blocks.reserve(kept);
    for (int l = 0; l < kept; ++l) blocks.emplace_back(c, a);
    if (phase != gpt2::Phase::forward) dx = Buffer(out.size());
  }

  Saved& saved(int l) { return blocks[l % blocks.size()]; }

  void run(Gpt2Step::Problem& p, cudaStream_t stream) {
    use_stream(blas, stream);
    forward(p, stream);
    if (phase == gpt2::Phase::forward) return;
    backward(p, stream);
    if (phase == gpt2::Phase::forward_backward) return;
    // torch.optim.AdamW(foreach=False) (on the fp32 master parameters): a launch a tensor.
    for (const gpt2::Tensor& t : tensors)
      adamw(p.params.data() + t.offset, p.grads.data() + t.offset, p.m.data() + t.offset, p.v.data() + t.offset,
            t.size, p.hp, p.step, stream);
  }

  void forward(Gpt2Step::Problem& p, cudaStream_t stream) {
    const float* P = p.params.data();
    float* x0 = saved(0).x.data();
    embedding(P + off.wte, p.tokens.data(), x0, rows, d, stream);  // wte[tokens]
    add_positions(x0, P + off.wpe, c.batch, c.context, d, stream);  // + wpe[t]
    for (int l = 0; l < c.layers; ++l) {
      // The block's output is the next block's input (its x; the forward alone overwrites its own).
      float* y = l + 1 < c.layers ? saved(l + 1).x.data() : out.data();
      self().block_forward(P, off.blocks[l], saved(l), y, stream);
    }
    self().head_forward(p, stream);
  }

  void backward(Gpt2Step::Problem& p, cudaStream_t stream) {
    const float* P = p.params.data();
    float* G = p.grads.data();
    self().head_backward(p, stream);
    for (int l = c.layers - 1; l >= 0; --l) self().block_backward(P, G, off.blocks[l], saved(l), stream);
    embedding_backward(dx.data(), p.tokens.data(), G + off.wte, rows, c.vocab, d, stream);
    positions_backward(dx.data(), G + off.wpe, c.batch, c.context, d, stream);
  }

 private:
  Step& self() { return static_cast<Step&>(*this); }
};

}  // namespace gpt2::eager
