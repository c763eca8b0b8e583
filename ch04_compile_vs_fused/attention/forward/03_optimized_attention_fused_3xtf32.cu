// Fused attention forward in fp32 on tensor cores: the fused fp32 variant's algorithm (online
// softmax over K/V tiles, no seq^2 tensor), its inputs and outputs, its tolerance, with both
// products on mma.sync m16n8k8 in "3xTF32". A tensor core multiplies tf32 (fp32 with a 10-bit
// mantissa) at about 7 times the rate of fp32 FMA on the SIMT units (H100: 495 against 67 TFLOP/s);
// alone it would lose 13 bits of every input. Splitting each fp32 value into two tf32 values, x =
// big + small, and summing three products (small b_big + big b_small + big b_big) keeps about 21
// bits: fp32 accuracy, the tolerance of the fp32 variants, at a third of the tensor cores' tf32
// rate, still twice the SIMT units' fp32 rate. It is how CUTLASS, and PyTorch's fp32 attention, use
// tensor cores for fp32.
//
// The arrangement is the bf16 variant's (FlashAttention-2): 4 warps, each owning 32 queries, so a
// row's softmax stays within a quad of lanes and the scores never leave the accumulator registers;
// K and V tiles arrive by cp.async. Two layouts avoid any shuffle or staging in shared memory. The k
// index of a product may be taken in any order as long as A and B agree, so a lane's k-pair
// (t, t + 4) is mapped to the adjacent columns (2t, 2t + 1): the Q and K fragments are one 8-byte
// load each, and the scores' accumulators (columns 2t, 2t + 1) are already P's A fragments for
// O += P V, V's rows read in the same order. Row strides of D + 8 (Q, K) and D + 4 (V) floats keep
// the fragment loads free of bank conflicts. Inputs stay fp32 in memory and are split as each
// fragment is loaded: four instructions a value (mma::split_tf32), which is where this kernel's
// time goes after the tensor cores (with cvt.rna.tf32 for the split it ran 1.2 to 1.6 times slower).
// Each tile's P V is summed apart and added to O in fp32: a tensor core's accumulation truncates,
// and over a thousand keys its errors would drift (flash_3xtf32.cuh, where the kernel lives, shared
// with the backward and the GPT-2 step).
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_3xtf32
#include "attention/attention.cuh"
#include "attention/kernels/flash_3xtf32.cuh"

LAB_VARIANT_STEP(Attention, LAB_STEP, "fused fp32 on tensor cores: 3xTF32 mma.sync (fp32 split into two tf32), fp32 accuracy",
                 .precision = "3xtf32", .writes = {"lse"}) {
  const attn::Dims& a = p.dims;
  flash3x::forward(p.q.data(), p.k.data(), p.v.data(), p.o.data(), p.lse.data(), a.bh(), a.seq, a.d, a.causal,
                   a.scale(), stream);
}
