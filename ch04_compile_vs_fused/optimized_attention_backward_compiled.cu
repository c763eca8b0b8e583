// Compiled attention backward: lab::jit fuses the mask's and the scale's backward into the softmax
// backward's write (an epilogue of the row kernel), so dS is written once, scaled and masked, and
// two passes over seq x seq disappear. The products stay cuBLAS calls and P, dP, dS stay in device
// memory, for the reason the compiled forward gives.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_backward_compiled
#include "attention.cuh"

LAB_VARIANT_STEP(AttentionBackward, 1, "compiled: lab::jit fuses the mask and scale backward into the softmax backward") {
  const float* probs = p.saved_probs(stream);
  p.seq2_scratch();
  const attn::Dims& a = p.dims;
  attn::use_stream(p.blas, stream);
  attn::gemm_tn(p.blas, a, 1.f, probs, p.dout.data(), p.dv.data());          // dV = P^T dO
  attn::gemm_nt(p.blas, a, 1.f, p.dout.data(), p.v.data(), p.dprobs.data());  // dP = dO V^T
  const lab::jit::RowKernel& softmax_backward = attn::compiled_row_kernel(lab::jit::RowOp::softmax_backward, a);
  softmax_backward.launch(probs, p.dprobs.data(), p.dscores.data(), a.rows(), a.seq, a.seq, stream);  // dS, masked, scaled
  attn::gemm_nn(p.blas, a, 1.f, p.dscores.data(), p.k.data(), p.dq.data());  // dQ = dS K
  attn::gemm_tn(p.blas, a, 1.f, p.dscores.data(), p.q.data(), p.dk.data());  // dK = dS^T Q
}
