// Fused, mixed precision, the loss with its loads in flight: the previous step
// (optimized_gpt2_step_fused_bf16_keep_ln.cu) with one change, the lesson of step 14
// (optimized_gpt2_step_fused_bf16_gelu_in_flight.cu) applied to the loss, the row kernel that
// --profile of step 15 found furthest from the memory's rate. Its kernel there
// (cross_entropy_rows_kernel, one launch a step: the loss and its gradient over the bf16 logits,
// written over them) gives a row a block of 1024 threads, each loading its 16 logits 2 bytes at a
// time (a warp's load 64 bytes). At 64 registers a thread that block fills an SM's register file,
// so an SM holds one row, and while the row waits at its two block-wide reductions (the max, then
// the sum), nothing of the next row is in flight: 0.139 ms a step at GPT-2 small, context 1024,
// vocabulary 10000, for 164 MB read and written (1.2 TB/s of the H200's 4.8).
// Here cross_entropy_vecs_kernel (kernels.cuh; the policy flag kLossInFlight) gives a row 256
// threads, each issuing its 16-byte loads (8 logits each, 5 a thread at 10000 classes) before it
// unpacks the first, so an SM holds several rows, and one row's reductions overlap the other rows'
// loads.
//
// Why it is faster: a kernel that waits on its loads needs enough bytes in flight to cover the
// memory's latency (Little's law: bytes in flight = bandwidth x latency, some 40 KB an SM on an
// H200). One row of 1024 threads with 2-byte loads keeps a row's worth in flight an SM and none
// while it reduces; several rows of 16-byte loads keep the memory busy through the reductions. On
// an H200 (2026-11-29, one call, L2 flushed, median of 10, --profile): the loss 0.045 ms a step
// where step 15's took 0.139 (3.6 TB/s); the forward alone 2.563 against 2.621 ms at small, the
// forward and backward 7.321 against 7.409, the full step 7.882 against 7.910 (there AdamW, on the
// other stream, hides part of any gain). Past 16384 classes (GPT-2's padded 50304) the row does not
// fit, and the previous step's kernels run. Against PyTorch: ../README.md, "Step 16".
// The same treatment of qkv_rows_sum_kernel (four columns a thread, four rows' 16-byte loads in
// flight) was tried and measured no faster (0.142 against 0.137 ms a step): its input, dQ, was just
// written by the attention backward and likely still lies in L2 (a reading, not profiled).
//
// The arithmetic is the previous step's roundings: the same max, expf, sum and logf, the gradient
// the same expression rounded once into bf16. Only the order of the softmax denominator's fp32 sum
// differs, which the check's bound for a sum allows in any order. Where the kernel does not fit (a
// vocabulary not a multiple of 8 or past 16384), the previous step's kernels run. The precision is
// the previous step's.
//
// What it replaces, against the previous step:
//   | before                                            | this step's                               |
//   | ------------------------------------------------- | ----------------------------------------- |
//   | cross_entropy_rows_kernel: 1024 threads a row,    | cross_entropy_vecs_kernel: 256 threads a  |
//   | 2-byte loads, one row an SM                       | row, 16-byte loads, several rows an SM    |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_loss_in_flight
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products with the loss kernel in flight: Bf16LossInFlight
// (epilogue_products.cuh, where step 17 builds on it): Bf16KeepLn with kLossInFlight
// (policy::NamesLossInFlight).
static_assert(policy::Products<Bf16LossInFlight> && policy::NamesLossInFlight<Bf16LossInFlight> &&
              policy::NamesKeepLayerNorm<Bf16LossInFlight> && Bf16LossInFlight::kLossInFlight);

using FusedBf16LossInFlight = FusedStep<Bf16LossInFlight, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16LossInFlight, LAB_STEP,
                       "fused, mixed precision, the loss with 16-byte loads and several rows an SM in flight (sm_90a)");
