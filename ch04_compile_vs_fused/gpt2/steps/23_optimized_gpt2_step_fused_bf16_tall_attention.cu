// Fused, mixed precision, the attention backward on query tiles of 128: the previous step
// (optimized_gpt2_step_fused_bf16_gelu_forward_in_product.cu) with one change, in the attention's
// backward. There every Hopper step since step 8 ran the attention ladder's step 5 kernel at GPT-2's
// head size 64: two consumer warpgroups of 64 keys, each making S^T, dP^T and dQ as m64n64 products
// over 64-query tiles and reducing its own 64 x 64 tile of dQ into L2 at every tile. Here it runs the
// ladder's step 12 kernel (attention/backward/12_optimized_attention_backward_fused_wgmma_tall.cu,
// plan kTallTiles): the same two consumers over 128-query tiles, S^T and dP^T as m64n128 products,
// P^T made while dP^T's products run, and dQ split by queries, so a block reduces one 64 x 64 tile of
// dQ a consumer a tile of 128 queries, half of step 5's.
//
// Why it should be faster: at GPT-2 small's attention (4 x 12 heads, 1024 tokens, causal) the
// ladder's step 12 took 87 us where its step 10 took 96 (H100, session 95,
// ../../results/attention_backward_tall_s94/), and step 5's kernel on two consumers is slower than
// step 10's there. Twelve layers a step at small, 24 at medium, 48 at xl.
//
// The arithmetic is the previous step's: the same products of bf16 operands in fp32 accumulators,
// grouped in other tiles (dQ's sum over a block's 128 keys is one product, where it was two partial
// products added in L2). At head sizes other than 64 the previous step's kernels run.
//
// What it replaces, against the previous step:
//   | before                                                 | this step's                          |
//   | ------------------------------------------------------ | ------------------------------------ |
//   | flashtma::bwd::launch, step 5's plan: 64-query tiles,  | plan kTallTiles: 128-query tiles,    |
//   | dQ a consumer's own over its 64 keys                   | dQ split by queries over 128 keys    |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_tall_attention
#include "gpt2/fused/epilogue_products.cuh"
#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

namespace {

// The previous step's attention (HopperQkvRows: Q, K and V read from the QKV product's rows, dQ, dK
// and dV written into its gradient's) with the backward's plan kTallTiles at head size 64.
struct HopperTall : HopperQkvRows {
  HopperTall(const gpt2::Config& c, gpt2::Phase phase) : HopperQkvRows(c, phase) {
    if (c.head_dim() != 64 || phase == gpt2::Phase::forward ||
        !flashtma::device_supports(lab::current_device()).empty())
      return;
    flashtma::bwd::prepare(64, true, kBackwardConsumers, flashtma::bwd::kTallTiles);
  }

  void backward_qkv_rows(const __nv_bfloat16* qkv, const __nv_bfloat16* dout, const float* lse, const float* delta,
                         float* dq, __nv_bfloat16* dqkv, float* db, int batch, int heads, int seq, int hd,
                         bool causal, float scale, cudaStream_t stream) {
    if (hd != 64)
      return HopperQkvRows::backward_qkv_rows(qkv, dout, lse, delta, dq, dqkv, db, batch, heads, seq, hd, causal,
                                              scale, stream);
    const std::size_t dm = std::size_t(heads) * hd;
    flashtma::bwd::Maps m = flashtma::bwd::rows_maps(qkv, qkv + dm, qkv + 2 * dm, 3 * dm, dout, dq, batch * heads,
                                                     heads, seq, hd, kBackwardConsumers);
    m.dq_plan = flashtma::bwd::kTallTiles;
    flashtma::bwd::launch(m, lse, delta, nullptr, nullptr, batch * heads, seq, hd, causal, scale, stream,
                          kv_rows(dqkv, db, heads, hd));
  }
};

using FusedBf16Tall = FusedStep<Bf16GeluForwardInProduct, HopperTall>;

// The topic's check shapes at head size 64 are one query tile of 128 (65 and 100 tokens): one more
// with three, the last cut short, in key blocks that run several of them (260 tokens, two sequences;
// one layer, 0.8 GFLOP for the CPU reference, within the topic's 1).
struct Tall : FusedBf16Tall {
  using FusedBf16Tall::FusedBf16Tall;
  static lab::Declared declared() {
    lab::Declared d = FusedBf16Tall::declared();
    d.checks = {lab::Shape{1, 128, 2, 260, 2, 61, 3}};
    return d;
  }
};

}  // namespace

LAB_VARIANT_CLASS_STEP(Tall, LAB_STEP,
                       "fused, mixed precision, the attention backward on query tiles of 128 at head size 64 "
                       "(the attention ladder's step 12 kernel), dQ split by queries (sm_90a)");
