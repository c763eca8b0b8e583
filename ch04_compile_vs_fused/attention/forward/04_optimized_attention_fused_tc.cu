// Fused attention forward on tensor cores: the fused variant's algorithm (online softmax over
// K/V tiles, no seq^2 tensor) with bf16 inputs, fp32 accumulation and the two products on
// mma.sync m16n8k16 (FlashAttention-2's arrangement). A block of 4 warps owns 128 queries, a warp
// 32 of them, so the softmax of a row never leaves its warp: the scores of a 32 x 64 tile live in
// the accumulator registers (64 a thread), their row max and sum need two shuffles across a quad
// of lanes, and the probabilities are already laid out as the A operand of P V, so P goes from
// accumulators to the next mma without touching shared memory. K and V tiles arrive through
// cp.async, one buffer each, in FlashAttention-2's schedule: the next K tile is copied while the
// softmax and P V run, the next V tile while Q K^T runs (double buffering both was measured and
// was not faster). Inputs are bf16 copies of Q, K, V (made untimed, as a bf16
// model holds them); the output O and lse are fp32. Precision: bf16 (inputs and P rounded to 8
// bits of mantissa), declared, and judged by the reference's slack for it.
// The next step, optimized_attention_fused_wgmma, runs d = 128 on Hopper's warpgroup wgmma.
// The kernel is in flash_bf16.cuh, which the Python bridge shares.
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_tc
#include "attention/attention.cuh"
#include "attention/kernels/flash_bf16.cuh"

namespace {

// The variant's state: the bf16 copies of Q, K and V, made before timing.
struct TensorCores {
  using Topic = Attention;
  attn::Bf16Inputs in16;
  TensorCores(const Attention::Problem& p, cudaStream_t stream) : in16(p, stream) {}
  // bf16, its running max kept over tiles of 64 keys (the check emulates its rounding of P).
  static lab::Declared declared() {
    return {.precision = "bf16", .writes = {"lse"}, .schedule = [](const lab::Shape&) {
              return std::any(attn::ForwardSchedule(flashbf16::fwd::Config<64>::kBc));
            }};
  }

  void run(Attention::Problem& p, cudaStream_t stream) {
    const attn::Dims& a = p.dims;
    flashbf16::forward(in16.q.data(), in16.k.data(), in16.v.data(), p.o.data(), p.lse.data(), a.bh(), a.seq, a.d,
                       a.causal, a.scale(), stream);
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(TensorCores, LAB_STEP, "fused on tensor cores: bf16 mma.sync, fp32 accumulation, P kept in registers");
