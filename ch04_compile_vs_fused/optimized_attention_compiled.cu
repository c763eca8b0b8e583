// Compiled attention: what a compiler of element-wise operations makes of the vanilla forward.
// lab::jit fuses the scale and the causal mask into the softmax's reads (a prologue of the row
// kernel: the expression below, computed as S is read, never stored), so two of the five passes
// over seq x seq disappear; the matrix products stay cuBLAS calls, as Inductor leaves them to
// cuBLAS. S and P remain: the softmax needs the whole row of S, which is the output of a product,
// before it can write any of P; fusing across that needs a different algorithm (the online softmax
// of the fused variant), not a better compiler of element-wise chains.
// `ch04_compile_vs_fused/demo_jit --attention 64` prints the generated kernels.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_compiled
#include "attention.cuh"

LAB_VARIANT_STEP(Attention, 1, "compiled: lab::jit fuses the scale and the mask into the softmax; S and P stay") {
  p.seq2_buffers();
  const attn::Dims& a = p.dims;
  attn::use_stream(p.blas, stream);
  attn::gemm_nt(p.blas, a, 1.f, p.q.data(), p.k.data(), p.scores.data());  // S = Q K^T
  const lab::jit::RowKernel& softmax = attn::compiled_row_kernel(lab::jit::RowOp::softmax, a);
  softmax.launch(p.scores.data(), nullptr, p.probs.data(), a.rows(), a.seq, a.seq, stream);  // P, scaled and masked
  attn::gemm_nn(p.blas, a, 1.f, p.probs.data(), p.v.data(), p.o.data());  // O = P V
}
