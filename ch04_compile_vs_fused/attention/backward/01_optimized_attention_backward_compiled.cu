// Compiled attention backward: lab::jit fuses the mask's and the scale's backward into the softmax
// backward's write (an epilogue of the row kernel), so dS is written once, scaled and masked, and
// two passes over seq x seq disappear. The products stay cuBLAS calls and P, dP, dS stay in device
// memory, for the reason the compiled forward gives.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_compiled
#include "attention/attention.cuh"

namespace {
// The variant's state: the eager one's (a cuBLAS handle, P, dP and dS) and the generated row kernel,
// built (or taken from the cache) before timing.
struct Compiled {
  using Topic = AttentionBackward;
  lab::CublasHandle blas;
  attn::SavedProbs saved;
  attn::Seq2Buffers seq2;
  const lab::jit::RowKernel& softmax_backward;
  Compiled(const AttentionBackward::Problem& p, cudaStream_t stream)
      : saved(blas, p, stream), seq2(p.dims),
        softmax_backward(attn::compiled_row_kernel(lab::jit::RowOp::softmax_backward, p.dims)) {}

  void run(AttentionBackward::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    const float* probs = saved.probs.data();
    float *dprobs = seq2.first.data(), *dscores = seq2.second.data();
    attn::use_stream(blas, stream);
    attn::gemm_tn(blas, a, 1.f, probs, p.dout.data(), p.dv.data());                  // dV = P^T dO
    attn::gemm_nt(blas, a, 1.f, p.dout.data(), p.v.data(), dprobs);                  // dP = dO V^T
    softmax_backward.launch(probs, dprobs, dscores, a.rows(), a.seq, a.seq, stream);  // dS, masked, scaled
    attn::gemm_nn(blas, a, 1.f, dscores, p.k.data(), p.dq.data());                   // dQ = dS K
    attn::gemm_tn(blas, a, 1.f, dscores, p.q.data(), p.dk.data());                   // dK = dS^T Q
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Compiled, LAB_STEP, "compiled: lab::jit fuses the mask and scale backward into the softmax backward");
