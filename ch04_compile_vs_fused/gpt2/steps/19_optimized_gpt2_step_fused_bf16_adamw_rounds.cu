// Fused, mixed precision, AdamW writing the next step's bf16 weights: the previous step
// (optimized_gpt2_step_fused_bf16_qkv_rows.cu) with one change, in who makes the bf16 copy of each
// stage's weights that the products read. Until here a pass of its own makes it at the start of
// every step (round_kernel, on the side stream since step 17: 4 bytes read and 2 written a
// parameter, 13 launches a step at GPT-2 small), from the parameters that the previous step's
// AdamW had just written. AdamW held each of those values in a register when it stored it.
// Here (step.cuh: kAdamWRounds, the policy Bf16AdamWRounds; flat_adamw.cuh) AdamW stores the
// parameter's bf16 value too, into the copy the next step reads: 2 bytes more a parameter in a
// kernel that moves 28, where the pass moved 6 and was a launch of its own. The copy has to outlive
// the step, so this holds for the stages whose saved tensors (the copy among them) lie in the spill
// buffer, which nothing else of the step writes; the stages whose saved tensors lie in the
// gradients' buffer are written over by the backward, and are rounded ahead as before
// (gpt2::plan_saved decides which: at small, context 1024, whose activations outweigh its weights,
// 10 of the 13 stages, the head's among them; 9 of 13 at vocabulary 50304; 10 of 25 at medium,
// context 512; at xl, context 256, the other way round, 1 of 49). The first step's copies
// are made once when the step is set up, from the parameters it is given. The forward alone and
// the forward and backward, which run no AdamW, round as the previous step.
//
// Why it is faster: the work is the same value written by the kernel that computes it instead of
// read back by another: 4 bytes a parameter fewer moved (at small, context 1024: 380 MB a step)
// and the launches gone. Measured on an H200: ../README.md, "Step 19".
//
// The arithmetic is the previous step's, value for value: the same fp32 parameter rounded to
// nearest bf16 by the same conversion, stored by AdamW instead of read back. The precision is the
// previous step's. What the check of one step cannot see (the copy AdamW writes is read by the
// next step) a test checks, Gpt2SecondStep.optimized_gpt2_step_fused_bf16_adamw_rounds in
// ch04_tests: a second step, held to the reference run from the state the first one left.
//
// What it replaces, against the previous step:
//   | before                                            | this step's                               |
//   | ------------------------------------------------- | ----------------------------------------- |
//   | AdamW writes the fp32 parameters; the next step's | AdamW writes them and their bf16 copy;    |
//   | round_kernel reads them back into the bf16 copy   | the next step reads the copy (stages in   |
//   |                                                   | the spill buffer; the others as before)   |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_adamw_rounds
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products with AdamW writing the copies (Bf16AdamWRounds, epilogue_products.cuh)
// and its attention reading the QKV product's rows (HopperQkvRows, hopper_attention.cuh).
using FusedBf16AdamWRounds = FusedStep<Bf16AdamWRounds, HopperQkvRows>;

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16AdamWRounds, LAB_STEP,
                       "fused, mixed precision, AdamW writing the next step's bf16 weights where they outlive the "
                       "step (sm_90a)");
