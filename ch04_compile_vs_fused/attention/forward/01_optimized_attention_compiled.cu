// Compiled attention: what a compiler of element-wise operations makes of the vanilla forward.
// lab::jit fuses the scale and the causal mask into the softmax's reads (a prologue of the row
// kernel: the expression below, computed as S is read, never stored), so two of the five passes
// over seq x seq disappear; the matrix products stay cuBLAS calls, as Inductor leaves them to
// cuBLAS. S and P remain: the softmax needs the whole row of S, which is the output of a product,
// before it can write any of P; fusing across that needs a different algorithm (the online softmax
// of the fused variant), not a better compiler of element-wise chains.
// `ch04_compile_vs_fused/demo_jit --attention 64` prints the generated kernels.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_compiled
#include "attention/attention.cuh"

namespace {
// The variant's state: a cuBLAS handle, S and P (the compiler fuses around them, not through
// them), and the generated row kernel, built (or taken from the cache) before timing.
struct Compiled {
  using Topic = Attention;
  lab::CublasHandle blas;
  attn::Seq2Buffers seq2;
  const lab::jit::RowKernel& softmax;
  explicit Compiled(const Attention::Problem& p)
      : seq2(p.dims), softmax(attn::compiled_row_kernel(lab::jit::RowOp::softmax, p.dims)) {}

  void run(Attention::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    float *scores = seq2.first.data(), *probs = seq2.second.data();
    attn::use_stream(blas, stream);
    attn::gemm_nt(blas, a, 1.f, p.q.data(), p.k.data(), scores);                           // S = Q K^T
    softmax.launch(scores, nullptr, probs, a.rows(), a.seq, a.seq, stream);               // P, scaled and masked
    attn::gemm_nn(blas, a, 1.f, probs, p.v.data(), p.o.data());                            // O = P V
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Compiled, LAB_STEP, "compiled: lab::jit fuses the scale and the mask into the softmax; S and P stay");
