// Fused, mixed precision, the attention writing its outputs where the products read them: the
// previous step (optimized_gpt2_step_fused_bf16_hopper.cu) with one change, at the attention's two
// ends. There the attention kernels wrote by head, in fp32, and the step laid their outputs out
// again for the products: a pass merged O's heads into the rows the projection reads, rounding to
// bf16 (merge_heads_kernel: 4 B read and 2 B written an element), and a pass took dQ, dK and dV
// back into the rows of the QKV product's dY, rounding to bf16 and summing each column into the
// bias gradient (qkv_rows_sum_kernel: 12 B read and 6 B written a token a column of the model).
// Here the kernels' epilogues do it from the registers that hold the values:
//  - the forward's (flash_tma.cuh, flashtma::Rows): each consumer warpgroup divides its O by the
//    softmax's sum and stores it in bf16 straight into the merged rows, token b T + t, columns of
//    head h from h hd (hd the model's head size; a padded head's extra columns are not written);
//  - the backward's (backward_wgmma.cuh, flashtma::bwd::KVRows): each warpgroup's 64 keys of dK and
//    dV go in bf16 into dY's rows, and each column's sum over them, from the fp32 values, is
//    reduced by shuffles within a warp and in shared memory across the warpgroup, then added
//    into the bias gradient by one atomic a column.
// dQ is still summed over the blocks of keys, by the TMA's adds into fp32 by head; only its third
// of the pass remains (qkv_rows_sum_kernel over dQ's columns).
//
// Why it is faster: the two passes read back 16 B and wrote 8 B a token a column of the model that
// the kernels had just written in fp32; the kernels now write 4 B of bf16 instead of 8 B of fp32
// for O, dK and dV, and the sums cost shuffles and atomics, not bytes. At small, context 1024 the
// passes took 57 us a block (H100, --profile of the previous step: merge_heads 22 us, qkv_rows_sum
// 36 us), 0.7 ms of a step of 11.6; this step's profile has qkv_rows_sum at 13 us and the two
// kernels 8 us slower for their epilogues: 11.2 ms (gpt2/tensor_cores.md).
//
// The arithmetic is the previous step's: O and dK, dV rounded once to nearest, even, from the same
// fp32 values, and the bias gradient the sum of the unrounded values in another order (each
// warp's keys, then the warps'), so the check is the same ("bf16+bf16-attention"). Head widths the
// Hopper kernels do not take (the checks' 16 and 32) run the mma.sync kernels by head, as the
// previous step does, and the two passes here, in the policy.
//
// What it replaces, against the previous step:
//   | before                                         | this step's                                      |
//   | ---------------------------------------------- | ------------------------------------------------ |
//   | forward: O by head in fp32, merge_heads_kernel | the forward's epilogue writes the rows in bf16   |
//   | backward: dK, dV by head in fp32               | the backward's epilogue writes dY's rows in bf16 |
//   | qkv_rows_sum over dQ, dK and dV                | qkv_rows_sum over dQ; dK, dV summed by the kernel |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_rows
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// HopperRows (hopper_attention.cuh, kept by the later bf16 steps): HopperAttention with its
// outputs in the products' rows (policy::WritesRows).
using FusedBf16Rows = FusedStep<Bf16GradGemm, HopperRows>;  // Bf16GradGemm: policies.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Rows, LAB_STEP,
                       "fused, mixed precision, the Hopper attention's epilogues write O and dK, dV in bf16 where the "
                       "products read them, with the QKV bias gradient of dK and dV summed there (sm_90a)");
