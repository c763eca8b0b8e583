// Fused, mixed precision, two biases added by the products' epilogue: the previous step
// (optimized_gpt2_step_fused_bf16_rows.cu) with one change, in the forward's QKV product and the
// MLP's first. There each product wrote its rows in fp32 (cuBLAS: bf16 operands, fp32 output), and
// the pass after it read them back to add the bias and round to bf16:
//  - qkv_heads_kernel: Q, K, V by head, bias added, rounded (12 B read, 6 B written a token a
//    column of the model);
//  - bias_gelu_kernel: h = the pre-activation, bias added, rounded and kept for the backward, and
//    act = gelu(h) (16 B read, 8 B written a token a column of the model, of four).
// Here the two products run through cuBLASLt with the BIAS epilogue (LtBias, epilogue_products.cuh): the product's
// fp32 accumulator plus the bias, rounded once to bf16 as it leaves the registers. The passes after
// it read bf16 and add nothing: qkv_heads_kernel only lays the rows out by head, and GELU's pass is
// the backward's gelu_kernel, act from h.
//
// Why it is faster: the products write 2 B an element where they wrote 4, and the passes read 2 B
// where they read 4. An element of the MLP's 4d columns moved 12 B (4 written by the product, 4
// read and 4 written by the pass) and moves 6; one of the QKV's 3d moved 10 and moves 6: 36 B less
// a token a column of the model a block, 1.36 GB a step at small, context 1024 (0.45 ms at 3 TB/s).
//
// The arithmetic differs from the previous step's in one rounding, which the step declares: with a
// bf16 output, cuBLASLt's epilogue reads the bias in bf16 (the output's type; an fp32 bias is
// refused for bf16 outputs), so the two biases are their bf16 copies (rounded with the stage's
// weights), as autocast rounds nn.Linear's bias. The sum is still formed in fp32 (the epilogue
// computes in the scale type) and rounded once. The precision "bf16-epilogue-bias" has the check's
// model round those two biases too (gpt2::ModelOptions::epilogue_bias_in_bf16). cuBLASLt also has
// GELU epilogues (GELU_AUX_BIAS, DGELU_BGRAD) that would take GELU's pass too, but theirs is the
// tanh approximation, and the model's GELU is the exact one (erf), as PyTorch's nn.GELU(): a
// different function, not a faster one.
//
// What it replaces, against the previous step:
//   | before                                                  | this step's                                 |
//   | ------------------------------------------------------- | ------------------------------------------- |
//   | QKV product to fp32; qkv_heads_kernel adds the bias     | cuBLASLt BIAS epilogue to bf16; laid out    |
//   | MLP's first product to fp32; bias_gelu_kernel (h, act)  | cuBLASLt BIAS epilogue writes h; gelu_kernel |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_epilogue
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// Bf16BiasEpilogue and its cuBLASLt product, LtBias: gpt2/fused/epilogue_products.cuh (kept by the later
// bf16 steps).
using FusedBf16Epilogue = FusedStep<Bf16BiasEpilogue, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Epilogue, LAB_STEP,
                       "fused, mixed precision, the QKV and MLP-first products' biases (in bf16) added by cuBLASLt's "
                       "epilogue as they write bf16, the passes after them reading bf16 (sm_90a)");
