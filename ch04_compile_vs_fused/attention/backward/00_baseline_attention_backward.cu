// Vanilla attention backward, as eager autograd runs it through the forward's saved P: cuBLAS
// dV = P^T dO and dP = dO V^T, a softmax-backward kernel dS = P o (dP - rowsum(P o dP)), the mask's
// backward (zero above the diagonal) and the scale's (times 1/sqrt(d)) as kernels of their own,
// then cuBLAS dQ = dS K and dK = dS^T Q. Three seq x seq tensors (P saved by the forward, dP, dS),
// each crossing device memory several times: the same cost as the forward's, twice over.
// Run: make ch04 && ./ch04_compile_vs_fused/baseline_attention_backward
#include "attention/attention.cuh"

namespace {

// The variant's state: a cuBLAS handle, P as the eager forward left it (computed before timing),
// and the two seq x seq tensors of its backward, dP and dS.
struct Eager {
  using Topic = AttentionBackward;
  lab::CublasHandle blas;
  attn::SavedProbs saved;
  attn::Seq2Buffers seq2;
  Eager(const AttentionBackward::Problem& p, cudaStream_t stream) : saved(blas, p, stream), seq2(p.dims) {}

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    const float* probs = saved.probs.data();
    float *dprobs = seq2.first.data(), *dscores = seq2.second.data();
    attn::use_stream(blas, stream);
    attn::gemm_tn(blas, a, 1.f, probs, p.dout.data(), p.dv.data());    // dV = P^T dO
    attn::gemm_nt(blas, a, 1.f, p.dout.data(), p.v.data(), dprobs);    // dP = dO V^T
    attn::softmax_backward_rows(probs, dprobs, dscores, a.rows(), a.seq, stream);  // dS = P o (dP - rowsum(P o dP))
    if (a.causal) attn::causal_mask(dscores, a, 0.f, stream);          // masked_fill's backward
    attn::scale(dscores, dprobs, a.scores(), a.scale(), stream);       // the scale's backward
    attn::gemm_nn(blas, a, 1.f, dprobs, p.k.data(), p.dq.data());      // dQ = dS K
    attn::gemm_tn(blas, a, 1.f, dprobs, p.q.data(), p.dk.data());      // dK = dS^T Q
  }
};
}  // namespace

LAB_VARIANT_CLASS(Eager, baseline, "vanilla: cuBLAS products, softmax/mask/scale backward a kernel each");
