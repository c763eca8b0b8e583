// The GPT-2 step's attention on the chapter's Hopper kernels (HopperAttention), the policy that
// optimized_gpt2_step_fused_bf16_hopper.cu introduces and the later bf16 steps build on: at head
// widths 64 and 128, the forward of attention/forward/08_optimized_attention_fused_overlap.cu (the
// overlapped schedule on flash_tma.cuh's frame) and the backward of
// attention/backward/05_optimized_attention_backward_fused_wgmma.cu (backward_wgmma.cuh); at other
// widths, the mma.sync kernels (FlashBf16, policies.cuh). The kernels need an sm_90 GPU and a
// build for sm_90a: a file that includes this header says `lab-arch: sm_90a`.
#pragma once

#include <string>

#include "attention/hopper/backward_wgmma.cuh"
#include "attention/hopper/overlapped.cuh"
#include "gpt2/fused/kernels.cuh"
#include "gpt2/fused/policies.cuh"

namespace {

// Tensor maps over the step's Q, K, V, dO and dQ are made at each call: host work, done once, when
// the step's graph is captured.
struct HopperAttention {
  static constexpr const char* kPrecision = "bf16";
  using Operand = __nv_bfloat16;
  using Schedule = flashtma::Overlapped;
  // The backward's consumer warpgroups a block (backward_wgmma.cuh): two, 128 keys a block, where
  // the attention ladder's step takes three (192 keys) at d = 64. A GPT-2 step's attention is a
  // small grid: at small, context 1024 (48 heads of 1024 keys), three make 288 blocks, 2.2 waves of
  // the H100's 132 SMs, the last one mostly idle; two make 384, and the backward took 125 us
  // against 133 (H100, 2026-11-26, the ladder's program at 4x12x1024x64 causal; step 9 10.05 ms
  // against 10.14 at small, 15.66 against 15.92 at medium, context 512). At the ladder's
  // 8x16x4096x64 two are slower (4.67 ms against 4.17: 31 waves either way, and three share each
  // Q and dO tile among more keys), so the choice is the step's, not the kernel's default. At
  // d = 128 the kernel runs two either way.
  static constexpr int kBackwardConsumers = 2;
  static bool hopper(int d) { return d == 64 || d == 128; }

  HopperAttention(const gpt2::Config& c, gpt2::Phase phase) {
    const int dp = flash_width(c.head_dim());
    if (!hopper(dp) || !flashtma::device_supports(lab::current_device()).empty()) return;
    flashtma::prepare<Schedule>(dp, true);
    if (phase != gpt2::Phase::forward) flashtma::bwd::prepare(dp, true, kBackwardConsumers);
  }
  static std::string supports(const lab::DeviceFacts& dev) { return flashtma::device_supports(dev); }

  // The maps of a forward over bh heads of seq queries of width d, by head.
  static flashtma::Maps maps(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int bh, int seq,
                             int d) {
    return flashtma::maps(q, k, v, attn::Dims(lab::Shape{1, bh, seq, d, 0}));
  }

  void forward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, float* o, float* lse, int bh,
               int seq, int d, bool causal, float scale, cudaStream_t stream) {
    if (!hopper(d)) return flashbf16::forward(q, k, v, o, lse, bh, seq, d, causal, scale, stream);
    flashtma::launch<Schedule>(maps(q, k, v, bh, seq, d), o, lse, bh, seq, d, causal, scale * flash::kLog2e, stream);
  }
  void backward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* dout,
                const float* lse, const float* delta, float* dq, float* dk, float* dv, int bh, int seq, int d,
                bool causal, float scale, cudaStream_t stream) {
    if (!hopper(d)) return flashbf16::backward(q, k, v, dout, lse, delta, dq, dk, dv, bh, seq, d, causal, scale, stream);
    flashtma::bwd::launch(flashtma::bwd::maps(q, k, v, dout, dq, bh, seq, d, kBackwardConsumers), lse, delta, dk, dv,
                          bh, seq, d, causal, scale, stream);
  }
};

static_assert(policy::Attention<HopperAttention> && policy::AttentionSupports<HopperAttention>);

}  // namespace
