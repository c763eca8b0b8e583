// Vanilla attention, as eager mode runs the textbook formula softmax(Q K^T / sqrt(d)) V: cuBLAS for
// Q K^T, then one kernel per element-wise operation (the scale; the causal mask), a row-softmax
// kernel, cuBLAS for P V (attn::eager_forward in attention_eager.cu: the backward problems start
// from the same forward). The products are fast; what costs is that S and P, seq x seq a head,
// go through device memory four or five times: written by the product, read and written by the
// scale, by the mask, by the softmax, read by the second product. At seq 4096 that is 64 MiB a
// head each way, against 1 MiB for Q, K, V and O together; peak_MiB shows the two seq^2 buffers.
// Run: make ch04 && ./ch04_compile_vs_fused/baseline_attention
#include "attention.cuh"

namespace {
// The variant's state: a cuBLAS handle and eager mode's two seq x seq tensors, S and P.
struct Eager {
  using Topic = Attention;
  lab::CublasHandle blas;
  attn::Seq2Buffers seq2;
  explicit Eager(const Attention::Problem& p) : seq2(p.dims) {}

  void run(Attention::Problem& p, cudaStream_t stream) {
    attn::eager_forward(blas, p.dims, p.q.data(), p.k.data(), p.v.data(), seq2.first.data(), seq2.second.data(),
                        p.o.data(), nullptr, stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS(Eager, baseline, "vanilla: cuBLAS Q K^T, a kernel per element-wise op, softmax, cuBLAS P V");
