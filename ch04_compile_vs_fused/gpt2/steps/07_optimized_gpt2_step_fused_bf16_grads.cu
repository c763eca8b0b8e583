// Fused, mixed precision, the products' gradients made in bf16: the previous step
// (optimized_gpt2_step_fused_bf16.cu) with one change, in its backward. There, each product's
// output gradient dY was made in fp32 by the kernel that computes it (the LayerNorm backward for
// the residual stream's gradient, GELU's backward, the QKV rows from the attention's backward, the
// loss's gradient), then read twice more before the product ran: by a pass that rounded it to
// bf16 for the tensor cores (to_bf16, 4 B read and 2 B written an element) and by a pass that
// summed its columns into the bias gradient (column_sums, 4 B read). Here the kernel that makes dY
// writes it in bf16 itself and sums its columns in the same pass, from the fp32 values it holds in
// registers: the step's Products policy (Bf16GradGemm, policies.cuh) says `using Grad =
// __nv_bfloat16`, and its backward takes dY as it arrives, without a pass of its own and without
// the bias (the kernels it relies on are gpt2/fused/kernels.cuh's *_sum kernels and the
// LayerNorm backward's next_dy and next_db; step.cuh's kGradCopies says where each runs).
//
// Why it is faster: the two passes were 2.1 ms of the previous step's 13.4 at small, context 1024
// (H100, demo_gpt2_report --profile): 49 roundings a step (4 a block and the head's, whose dY is
// the B T x V logits' gradient) and 48 column sums, each reading a tensor that had just been
// written. The kernels that make dY now write 2 B an element where they wrote 4 (GELU's backward,
// the QKV rows, the loss), or 2 B more beside the fp32 value the residual stream keeps (the
// LayerNorm backward). The sums cost registers, not bytes: a thread owns a column (the LayerNorm
// backward, the QKV rows) or four (GELU's backward), walks the rows, and adds its sums atomically
// once.
//
// The arithmetic is the previous step's: dY rounded once to nearest, even, from the same fp32 value,
// and the bias gradient the sum of the unrounded values (in another order: each thread's rows, then
// the threads' sums), so the check is the same (ModelOptions "bf16+bf16-attention").
//
// What it replaces, against the previous step:
//   | before                                               | this step's                                  |
//   | ---------------------------------------------------- | -------------------------------------------- |
//   | to_bf16 of each product's dY                         | the kernel that makes dY writes it in bf16   |
//   | column_sums of dY (a product's bias gradient)        | summed by that kernel, an atomic a column    |
//   | GELU backward in place in fp32                       | gelu_backward_sum_kernel, bf16 out           |
//   | qkv_rows_kernel (by head, fp32 rows)                 | qkv_rows_sum_kernel (by column, bf16 rows)   |
//   | the loss's gradient in place over the fp32 logits    | written in bf16 beside them                  |
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_grads
#include "gpt2/fused/step.cuh"

namespace {
// Bf16GradGemm (policies.cuh, kept by the later bf16 steps): the products' policy with `using Grad =
// __nv_bfloat16`, whose linear_backward() multiplies dY as it arrives, no rounding pass, no bias.
using FusedBf16Grads = FusedStep<Bf16GradGemm, FlashBf16>;  // FlashBf16: policies.cuh
}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Grads, LAB_STEP,
                       "fused, mixed precision, each product's dY written in bf16 by the kernel that makes it, with "
                       "the bias gradient summed there: no rounding pass, no column-sum pass");
