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
  static bool hopper(int d) { return d == 64 || d == 128; }

  HopperAttention(const gpt2::Config& c, gpt2::Phase phase) {
    const int dp = flash_width(c.head_dim());
    if (!hopper(dp) || !flashtma::device_supports(lab::current_device()).empty()) return;
    flashtma::prepare<Schedule>(dp, true);
    if (phase != gpt2::Phase::forward) flashtma::bwd::prepare(dp, true);
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
    flashtma::bwd::launch(flashtma::bwd::maps(q, k, v, dout, dq, bh, seq, d), lse, delta, dk, dv, bh, seq, d, causal,
                          scale, stream);
  }
};

static_assert(policy::Attention<HopperAttention> && policy::AttentionSupports<HopperAttention>);

}  // namespace
