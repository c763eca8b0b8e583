// Fused, mixed precision, the LayerNorms' output gradients in bf16: the previous step
// (optimized_gpt2_step_fused_bf16_adamw_rounds.cu) with one change, in the backward of the three
// products that read a LayerNorm's output: the head's, the MLP's first and the QKV product's. Each
// wrote its input gradient dX = dY W (B T x d, the gradient of the LayerNorm's output) in fp32, and
// the LayerNorm backward read it back, 4 B an element. Here the product writes dX in bf16 (cuBLAS:
// bf16 operands, fp32 accumulation, the sum rounded once on its way out: linear_dx_bf16, as the
// MLP's second product writes GELU's output gradient since step 11), and the LayerNorm backward
// reads 2 B an element: the same kernel, its dy's type a template parameter (layer_norm_backward_kernel).
//
// Why it is faster: an element of the d columns moved 4 B out of the product and 4 B into the
// LayerNorm backward; now 2 and 2. Two such tensors a block and one for the head: at small,
// context 1024, 25 tensors of 4096 x 768, 8 B an element less, about 315 MB a step (some 0.08 ms at
// 4 TB/s). Each LayerNorm backward reads 6.3 MB less of the 57 MB it moved (dy and x in fp32, the
// residual stream's gradient read and written in fp32, the next product's dY written in bf16).
//
// The arithmetic gains one rounding, which the step declares: each LayerNorm's output gradient
// rounded to bf16 before its backward reads it, as autocast's backward does (a linear layer's input
// gradient comes out of its product in bf16; LayerNorm's backward, in fp32, reads that). Everything
// after it is computed in fp32 as before. The precision "bf16-epilogue-bias-dact-logits-dln" has
// the check's model round those gradients too (gpt2::ModelOptions::ln_grad_in_bf16; the CPU test
// Gpt2Reference.LnGradInBf16IsModelledBothWays holds the model both ways). The projection's input
// gradient, which the attention reads as dO, stays in fp32 here: dout_heads rounds it into dO by
// head, and computes delta from it, as before.
//
// What it replaces, against the previous step:
//   | before                                                    | this step's                       |
//   | --------------------------------------------------------- | --------------------------------- |
//   | head, MLP's first, QKV products: dX = dY W in fp32 (4 B)  | dX in bf16 (2 B)                  |
//   | layer_norm_backward_kernel reads dy in fp32               | reads it in bf16                  |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_ln_grads
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products with the LayerNorms' output gradients in bf16 (Bf16LnGrads,
// epilogue_products.cuh) and its attention reading the QKV product's rows (HopperQkvRows,
// hopper_attention.cuh).
using FusedBf16LnGrads = FusedStep<Bf16LnGrads, HopperQkvRows>;

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16LnGrads, LAB_STEP,
                       "fused, mixed precision, the products before the LayerNorms writing their input gradients "
                       "in bf16, which the LayerNorm backward reads (sm_90a)");
