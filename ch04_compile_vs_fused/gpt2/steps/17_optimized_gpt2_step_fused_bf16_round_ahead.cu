// Fused, mixed precision, the weights rounded ahead: the previous step
// (optimized_gpt2_step_fused_bf16_loss_in_flight.cu) with one change, in where the step makes the
// bf16 copy of each block's weights that its products read. Until here the lead stream makes it
// at the start of each block's forward (round_kernel: 4 bytes read and 2 written a parameter, 13
// launches a step): memory-bound work between the compute-bound products, during which the tensor
// cores wait. At GPT-2 small, context 1024, that is 0.17 ms of the 7.9 ms step on an H200 (607 MB
// moved); at medium some 1.9 GB, at xl 9 GB, nearly 2 ms of its step.
// Here (step.cuh; the policy flag kRoundAhead) the step rounds every stage's weights on its side
// stream as soon as it starts, one stage after another, an event after each; the lead stream waits
// for stage l's event before block l's first product, and for nothing else. The side stream runs at
// the device's lowest priority, as AdamW does in the backward: its blocks take the SMs that the
// products of the earlier blocks leave idle (the last partial wave of a product's tiles, the
// short kernels between them), and the lead stream goes from one product to the next.
//
// Why it is faster: two kinds of work, one bound by memory and one by the tensor cores, overlap on
// two streams where one stream ran them in turn; what the rounding costs then is what the products
// lose to it, not its own time. The copies lie where they lay (each block's with its saved
// tensors, in memory that nothing else of the step writes before the backward), so the memory does
// not change. The forward alone keeps one block's saved tensors for all blocks, one copy at a time:
// it rounds as before. Measured on an H200: ../README.md, "Step 17".
//
// Tried first for this step and not kept: the LayerNorms a warp a row (residual_layer_norm_kernel
// and layer_norm_backward_kernel with a row a warp, its sums by shuffles alone, no barriers; the
// backward's column sums in a slice of shared memory a warp). On an H200 at small (--profile, one
// call): the backward 0.602 ms a step against the block kernel's 0.518, the forward 0.339 against
// 0.320. Four warps of 113 registers a block left an SM 16 warps, each taking its two rows one
// after the other; the block kernels, 512 blocks of 256 threads a launch, keep more rows in flight.
//
// The arithmetic is the previous step's, value for value: the same roundings of the same fp32
// weights, only made earlier. The precision is the previous step's.
//
// What it replaces, against the previous step:
//   | before                                            | this step's                               |
//   | ------------------------------------------------- | ----------------------------------------- |
//   | round_kernel on the lead stream at the start of   | every stage's round_kernel on the side    |
//   | each block's forward                              | stream at the step's start; the lead      |
//   |                                                   | stream waits for its stage's event        |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_round_ahead
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's products (Bf16LossInFlight) with the weights rounded ahead on the side stream
// (policy::NamesRoundAhead): Bf16RoundAhead, epilogue_products.cuh, where the next step finds it.
using FusedBf16RoundAhead = FusedStep<Bf16RoundAhead, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16RoundAhead, LAB_STEP,
                       "fused, mixed precision, every stage's bf16 weights rounded ahead on the side stream, "
                       "overlapping the products (sm_90a)");
