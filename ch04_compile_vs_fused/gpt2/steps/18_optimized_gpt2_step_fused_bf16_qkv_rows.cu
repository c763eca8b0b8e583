// Fused, mixed precision, the attention reading the QKV product's rows: the previous step
// (optimized_gpt2_step_fused_bf16_round_ahead.cu) with one change, in how the attention finds Q, K
// and V. Until here the QKV product writes its output rows (a token's row: its 3 d values, Q's
// heads side by side, then K's, then V's) and a pass, qkv_heads_kernel, copies them out by head
// ([batch heads][seq][hd] each), the layout the flash kernels' tensor maps were made over: 3 d
// values read and 3 d written a token, a launch a block. At GPT-2 small, context 1024 on an H200,
// 12 launches of 9 to 10 us a step; the copy by head is what the step saved for the backward.
// Here (hopper_attention.cuh: HopperQkvRows, the policy flag kReadsQkvRows) the product writes its
// rows where the saved Q, K and V lie, and the kernels read them there: their tensor maps run over
// the rows (flashtma::rows_maps: dimensions head size, tokens and heads, the rows 3 d values
// apart, the heads hd), and the producer warp asks for head b's rows r at (row b / heads seq + r,
// head b % heads) where it asked for (row r, head b) (flashtma::Fold). The TMA gathers a box of 64
// columns by a tile's rows from 128-byte pieces 3 d values apart as it copied a contiguous one: the
// same shared-memory tiles, the same kernels. At head sizes other than 64 and 128 (padded to the
// kernels' width) the copy by head stays.
//
// Why it is faster: a pass that only moved bytes is gone, 2 x 3 d x 2 bytes a token a block (38 MB
// a block, 453 MB a step at small, context 1024), and with it the scratch its input lay in (the
// forward's QKV rows, 37.7 MB at small: the saved region holds them now). Measured on an H200:
// ../README.md, "Step 18" (7.59 against 7.67 ms a full step at small, 36 MiB less at its peak).
//
// The arithmetic is the previous step's, value for value: the same rows, bias added in the
// product's epilogue and rounded once to bf16, read by the same kernels. The precision is the
// previous step's.
//
// What it replaces, against the previous step:
//   | before                                            | this step's                               |
//   | ------------------------------------------------- | ----------------------------------------- |
//   | the QKV product's rows into scratch, then         | the rows into the saved Q, K, V region;   |
//   | qkv_heads_kernel: Q, K, V by head, saved          | the attention's maps over the rows        |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_qkv_rows
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products (Bf16RoundAhead, epilogue_products.cuh) and its attention reading
// the QKV product's rows (HopperQkvRows, hopper_attention.cuh).
using FusedBf16QkvRows = FusedStep<Bf16RoundAhead, HopperQkvRows>;

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16QkvRows, LAB_STEP,
                       "fused, mixed precision, the attention reading Q, K and V from the QKV product's rows "
                       "through its tensor maps, no copy by head (sm_90a)");
