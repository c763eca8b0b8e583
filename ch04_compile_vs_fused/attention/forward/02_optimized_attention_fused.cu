// Fused (flash) attention forward in fp32: one kernel, no seq x seq tensor in memory. A block owns
// 64 queries: their Q rows stay in shared memory (pre-multiplied by scale log2 e, so the softmax
// can use exp2) while the block streams K and V through shared memory 64 keys at a time. For each
// key tile it computes the 64 x 64 scores in registers (16 a thread), updates an online softmax
// per row (the running max m and sum l: when a new tile raises the max, the sum and the partial
// output are rescaled by exp2(m_old - m_new)), writes the tile's probabilities to shared memory and
// adds P V to the output in registers. At the end O = acc / l and lse = m + log l. The traffic is
// Q, K, V read (K and V once per query tile, mostly from L2) and O, lse written: O(seq d). What
// the compiled variant cannot do is exactly this: split the softmax across tiles of its row.
// Causal: a query tile stops at the diagonal tile (half the work), and the heaviest tiles are
// scheduled first.
// The kernel: flash_fp32.cuh (shared with the GPT-2 step's fused variant).
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused
#include "attention/attention.cuh"
#include "attention/kernels/flash_fp32.cuh"

LAB_VARIANT_STEP(Attention, LAB_STEP, "fused (flash) fp32: online softmax over K/V tiles, no seq^2 tensor",
                 .writes = {"lse"}) {
  const attn::Dims& a = p.dims;
  flash::forward(p.q.data(), p.k.data(), p.v.data(), p.o.data(), p.lse.data(), a.bh(), a.seq, a.d, a.causal, a.scale(),
                 stream);
}
