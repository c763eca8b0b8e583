// Fused, mixed precision, GELU's backward with its loads in flight: the previous step
// (optimized_gpt2_step_fused_bf16_gelu_once.cu) with one change, in one kernel. That step's GELU
// backward (gelu_backward_act_kernel) reads dact and h and writes act and dh, 8 bytes an element,
// with erff and expf between: some 40 instructions an element. Its thread owns four columns and
// walks the rows one at a time, one 8-byte load of each input, then the arithmetic, then the next
// row's loads: while a warp computes, no load of its is in flight, and the kernel moved 2.4 TB/s
// of the H200's 4.8 alone (41.9 us at GPT-2 small's 4096 x 3072, L2 flushed).
// Here (gelu_backward_act_in_flight_kernel, kernels.cuh) a thread owns eight columns, 16-byte
// accesses, and takes four rows at a time: the eight loads of the four rows issued before the
// first row's arithmetic, 128 bytes a thread in flight where there were 16, so one row's erff
// overlaps the next rows' loads. Blocks of 128 threads, about 1024 of them (8 an SM).
//
// Why it is faster: a kernel that waits on its loads between long stretches of arithmetic needs
// more than one row's loads in flight to keep the memory busy (Little's law: bytes in flight =
// bandwidth x latency). The H200 timed the kernel alone, L2 flushed: 34.1 against 41.9 us at
// small, context 1024; 24.5 against 29.7 at medium, context 512; 20.7 against 25.4 at xl, context
// 256. Two rows in flight did about as well at small (34.9 us, twice the blocks); a cheaper
// density (exp2f for expf) bought about 1 us more, for values no longer the forward's GELU bit for
// bit: not taken. In the step's graph, beside AdamW on the other stream, --profile gives it 0.544
// ms a step at small (step 13's kernel 0.625, an earlier session's profile), and the step went from
// 8.42-8.45 to 8.34-8.35 ms (an H200, the two alternating; at medium and xl within the rounds'
// spread). Against PyTorch: ../README.md, "Step 14, and the attention backward's block order".
//
// The arithmetic is unchanged, value for value: act and dh are the previous step's bit for bit (the
// same gelu_of and dgelu_of on the same erf, rounded once into bf16), the bias gradient the same
// fp32 sums in another order. Where the kernel does not fit (an odd d_model: 4 d not a multiple of 8
// columns), the previous step's kernel runs. The precision is the previous step's.
//
// What it replaces, against the previous step:
//   | before                                            | this step's                               |
//   | ------------------------------------------------- | ----------------------------------------- |
//   | gelu_backward_act_kernel: 4 columns a thread, one | gelu_backward_act_in_flight_kernel: 8     |
//   | row's 8-byte loads at a time, 256-thread blocks   | columns, four rows' 16-byte loads at once |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_gelu_in_flight
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products (Bf16GeluOnce: its two backward products for the MLP's second), with
// GELU's backward between them in flight: Bf16GeluInFlight (epilogue_products.cuh), which is
// Bf16GeluOnce with `static constexpr bool kGeluInFlight = true;` (policy::NamesGeluInFlight).
using FusedBf16GeluInFlight = FusedStep<Bf16GeluInFlight, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16GeluInFlight, LAB_STEP,
                       "fused, mixed precision, GELU's backward with four rows' loads in flight, eight columns "
                       "a thread (sm_90a)");
