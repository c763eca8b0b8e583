// Fused: the GPT-2 training step fused by hand. The products stay on cuBLAS (fp32, no TF32: the same
// FLOPs as vanilla, gpt2/fused/policies.cuh's Sgemm); what changes is everything between them (the
// kernels, gpt2/fused/kernels.cuh, and the schedule, gpt2/fused/step.cuh, shared with the fused steps
// that follow this one):
//   - the residual add, the bias before it and the next LayerNorm are one row kernel (a block a
//     row, the row in registers: read once, written twice: the residual stream and its norm);
//   - the QKV bias is added while Q, K, V are laid out by head, and the bias and GELU of the MLP are
//     one element-wise pass (keeping the pre-activation for the backward);
//   - attention is the chapter's flash kernel (flash_fp32.cuh): no T x T tensor, forward or
//     backward; the backward needs only the log-sum-exp and delta = rowsum(dO o O), which the
//     kernel that lays dO out by head computes on the way. A head size the kernels do not take
//     (the 2.7B model's 80) is laid out zero-padded to the next one they do (128): the zeros add
//     nothing to Q K^T, and the padded columns of O, dQ, dK, dV are never read back;
//   - the loss and its gradient are one kernel a row over the logits (the softmax never written;
//     the gradient takes the logits' place);
//   - the LayerNorm backward adds into the residual gradient and sums its parameters' gradients in
//     the same pass; the LayerNorms' and GELU's outputs are not kept for the backward but made
//     again there from what it keeps (the residual stream, its mean and rstd, the pre-activation);
//   - AdamW takes every tensor of a stage in one launch (16-byte accesses over the flat buffer), and
//     overlaps the backward: as soon as the backward has finished a stage's gradients (the head's,
//     then block L-1's down to block 0's), that stage is updated on a second stream of the graph at
//     the lowest priority, whose blocks fill what the backward's kernels leave idle;
//   - the whole step is one CUDA graph, captured in the prepare step: a few hundred launches become
//     one, and the step's scalars that change (AdamW's bias corrections) are read from device memory.
//   - what the forward keeps for the backward takes no memory of its own where the gradients'
//     buffer has room: a block's saved tensors lie in the gradients of the blocks before it, which
//     the backward writes only once it is done with them (gpt2::plan_saved). PyTorch gets the same
//     effect at run time from zero_grad(set_to_none=True) and its caching allocator; here it is a
//     static plan. At xl, context 256, 4.5 GB of the step's memory.
//
// Which of the vanilla step's operations (baseline_gpt2_step, a kernel each) each kernel replaces:
//   | vanilla's kernels                                        | the fused step's                      |
//   | -------------------------------------------------------- | ------------------------------------- |
//   | the projection's bias, the residual add, LayerNorm       | residual_layer_norm_kernel            |
//   | the QKV bias, three copies into heads                    | qkv_heads_kernel                      |
//   | Q K^T, scale, mask, softmax, P V (T x T tensors)         | the flash forward (flash_fp32.cuh)    |
//   | the heads merged back                                    | merge_heads_kernel                    |
//   | the MLP's bias, GELU                                     | bias_gelu_kernel                      |
//   | log-softmax, NLL, and their two backward kernels         | cross_entropy_kernel, mean_kernel     |
//   | LayerNorm backward, the residual gradient's add          | layer_norm_backward_kernel            |
//   | GELU backward                                            | gelu_kernel (GELU again), gelu_backward_kernel |
//   | dO into heads                                            | dout_heads_kernel (with delta)        |
//   | dV, dP, softmax backward, mask, scale, dQ, dK            | the flash backward (flash_fp32.cuh)   |
//   | dQ, dK, dV merged back (three kernels)                   | qkv_rows_kernel                       |
//   | AdamW, a launch a tensor (148 at small)                  | flat_adamw, a launch a stage, on a side stream |
//   | a few hundred launches a step                            | one CUDA graph                        |
//   The products (cuBLAS SGEMM, their bias gradients) are the same; LayerNorm's and GELU's outputs
//   are made again in the backward (layer_norm_again_kernel, gelu_kernel) instead of kept.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused
#include "gpt2/fused/step.cuh"

namespace {
using Fused = FusedStep<Sgemm>;  // the products on cuBLAS SGEMM, as vanilla's; attention: FlashFp32
}  // namespace

LAB_VARIANT_CLASS_STEP(Fused, LAB_STEP,
                       "fused: residual+bias+LayerNorm and bias+GELU passes, flash attention, one-pass loss and "
                       "gradient, multi-tensor AdamW overlapping the backward, the step as one CUDA graph (fp32 cuBLAS "
                       "products)");
