// Vanilla attention, as eager mode runs the textbook formula softmax(Q K^T / sqrt(d)) V: cuBLAS for
// Q K^T, then one kernel per element-wise operation (the scale; the causal mask), a row-softmax
// kernel, cuBLAS for P V: five operators, each a kernel (attention_eager.cu holds them, as a
// framework's operator library; the backward variants run the same forward to make their state).
// The products are fast; what costs is that S and P, seq x seq a head, go through device memory
// four or five times: written by the product, read and written by the scale, by the mask, by the
// softmax, read by the second product. At seq 4096 that is 64 MiB a head each way, against 1 MiB
// for Q, K, V and O together; peak_MiB shows the two seq^2 buffers.
// Run: make ch04 && ./ch04_compile_vs_fused/baseline_attention
#include "attention/attention.cuh"

namespace {
// The variant's state: a cuBLAS handle and eager mode's two seq x seq tensors, S and P.
struct Eager {
  using Topic = Attention;
  lab::CublasHandle blas;
  attn::Seq2Buffers seq2;
  explicit Eager(const Attention::Problem& p) : seq2(p.dims) {}

  void run(Attention::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    float *s = seq2.first.data(), *scaled = seq2.second.data();
    attn::use_stream(blas, stream);
    attn::gemm_nt(blas, a, 1.f, p.q.data(), p.k.data(), s);              // S = Q K^T        (writes seq^2)
    attn::scale(s, scaled, a.scores(), a.scale(), stream);               // S * scale        (reads, writes)
    if (a.causal) attn::causal_mask(scaled, a, -INFINITY, stream);       // masked_fill(-inf) (reads, writes)
    attn::softmax_rows(scaled, s, nullptr, a.rows(), a.seq, stream);     // P = softmax(S)   (reads twice, writes)
    attn::gemm_nn(blas, a, 1.f, s, p.v.data(), p.o.data());              // O = P V          (reads)
  }
};
}  // namespace

LAB_VARIANT_CLASS(Eager, baseline, "vanilla: cuBLAS Q K^T, a kernel per element-wise op, softmax, cuBLAS P V");
