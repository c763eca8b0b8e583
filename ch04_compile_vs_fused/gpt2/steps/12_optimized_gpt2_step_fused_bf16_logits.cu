// Fused, mixed precision, the logits in bf16: the previous step
// (optimized_gpt2_step_fused_bf16_dact.cu) with one change, at the head. There the head's product
// wrote the logits (B T x V, the step's largest tensor) in fp32; the loss read them (twice where the
// row does not fit in registers: past 16384 classes, GPT-2's padded 50304) and wrote their gradient
// in bf16 into a buffer of its own, which the head's backward read.
// Here the product writes the logits in bf16 (cuBLAS: bf16 operands, fp32 accumulation, the sum
// rounded once on its way out), the loss reads them in bf16 (its arithmetic in fp32, as before) and
// writes their gradient over them: the same kernels, the logits' type a template parameter
// (cross_entropy_rows_kernel and cross_entropy_kernel in kernels.cuh). And a row of bf16 logits
// fits in registers where an fp32 one did not: two to a 32-bit register, up to 57344 classes
// (cross_entropy_pairs_kernel), so past 16384 classes the loss reads its row once, not twice.
//
// Why it is smaller, and faster: 2 B a logit written instead of 4, and 2 B read instead of 4,
// once. At small, context 1024, vocabulary 10000 (41M logits), 164 MB a step less moved; at
// vocabulary 50304 (206M logits), 1.6 GB. The H100 measured 9.40 against 9.42 ms at small and, at
// 50304, 11.3 against 11.9 (0.1 of it from the bytes of the logits, read twice, 0.5 from the
// one-pass kernel). The step keeps 2 B a logit instead of 4 and no separate gradient buffer of
// that size: its peak 132 MiB lower at small, 762 MiB lower at vocabulary 50304 (tensor_cores.md,
// step 12).
//
// The arithmetic gains one rounding, which the step declares: each logit rounded to bf16 before the
// loss reads it, as autocast's head (a linear layer: its output bf16) hands them to the
// cross-entropy (which autocast runs in fp32, from those bf16 values). The precision
// "bf16-epilogue-bias-dact-logits" has the check's model round the logits too
// (gpt2::ModelOptions::logits_in_bf16).
//
// What it replaces, against the previous step:
//   | before                                                   | this step's                        |
//   | -------------------------------------------------------- | ---------------------------------- |
//   | head: logits = ln_f W^T in fp32 (4 B)                    | in bf16 (2 B)                      |
//   | the loss reads fp32 logits, writes dlogits (bf16) in gy  | reads bf16, writes over the logits |
//   | past 16384 classes, the row read twice                   | held in registers, two to one      |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_logits
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products (Bf16Dact) with head_bf16: Bf16Logits (epilogue_products.cuh), the
// head's product logits (M x V) = X W^T written in bf16, accumulated in fp32 (linear_bf16_out, the
// one cuBLAS call that differs from linear's: its output type; policy::HeadBf16Products).
using FusedBf16Logits = FusedStep<Bf16Logits, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Logits, LAB_STEP,
                       "fused, mixed precision, the head writing the logits in bf16, over which the loss writes "
                       "their gradient (sm_90a)");
