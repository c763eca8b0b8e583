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

// HopperAttention with the outputs in the products' rows (policy::WritesRows), the change
// optimized_gpt2_step_fused_bf16_rows.cu teaches; the later bf16 steps keep it.
struct HopperRows : HopperAttention {
  static constexpr bool kWritesRows = true;
  // At head widths the Hopper kernels do not take, the mma.sync kernels write by head, here.
  Buffer o, dkv;

  HopperRows(const gpt2::Config& c, gpt2::Phase phase) : HopperAttention(c, phase) {
    if (hopper(flash_width(c.head_dim()))) return;
    o = Buffer(heads_size(c));
    if (phase != gpt2::Phase::forward) dkv = Buffer(2 * heads_size(c));
  }

  // Where the kernels write: O into the attention's output rows (token-major, heads side by side,
  // d_model = heads x hd a row); dK and dV into the dQKV rows (3 d_model a row, K's and V's thirds) and
  // their bias gradients into db's. Both forms below (by head and from the QKV rows) write so.
  static flashtma::Rows o_rows(__nv_bfloat16* att, int heads, int hd) {
    return {.o = att, .heads = heads, .cols = hd, .ld = std::size_t(heads) * hd};
  }
  static flashtma::bwd::KVRows kv_rows(__nv_bfloat16* dqkv, float* db, int heads, int hd) {
    const std::size_t dm = std::size_t(heads) * hd;
    return {.dk = dqkv + dm, .dv = dqkv + 2 * dm, .db_k = db + dm, .db_v = db + 2 * dm, .heads = heads, .cols = hd,
            .ld = 3 * dm};
  }

  void forward_rows(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* att,
                    float* lse, int batch, int heads, int seq, int d, int hd, bool causal, float scale,
                    cudaStream_t stream) {
    const int bh = batch * heads;
    if (!hopper(d)) {
      flashbf16::forward(q, k, v, o.data(), lse, bh, seq, d, causal, scale, stream);
      merge_heads_kernel<<<blocks_for(o.size()), kThreads, 0, stream>>>(o.data(), att, o.size(), seq, heads, hd, d);
      LAB_CHECK(cudaGetLastError());
      return;
    }
    flashtma::launch<Schedule>(maps(q, k, v, bh, seq, d), nullptr, lse, bh, seq, d, causal, scale * flash::kLog2e,
                               stream, {}, o_rows(att, heads, hd));
  }

  void backward_rows(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                     const __nv_bfloat16* dout, const float* lse, const float* delta, float* dq, __nv_bfloat16* dqkv,
                     float* db, int batch, int heads, int seq, int d, int hd, bool causal, float scale,
                     cudaStream_t stream) {
    const int bh = batch * heads;
    const std::size_t dm = std::size_t(heads) * hd, tokens = std::size_t(batch) * seq;
    if (!hopper(d)) {
      float *dk = dkv.data(), *dv = dk + o.size();
      flashbf16::backward(q, k, v, dout, lse, delta, dq, dk, dv, bh, seq, d, causal, scale, stream);
      qkv_rows_sum_kernel<__nv_bfloat16><<<column_owner_grid(tokens, int(2 * dm)), kThreads, 0, stream>>>(
          dq, dk, dv, dqkv, db, tokens, seq, heads, hd, d, 1, 2);
      LAB_CHECK(cudaGetLastError());
      return;
    }
    flashtma::bwd::launch(flashtma::bwd::maps(q, k, v, dout, dq, bh, seq, d, kBackwardConsumers), lse, delta, nullptr,
                          nullptr, bh, seq, d, causal, scale, stream, kv_rows(dqkv, db, heads, hd));
  }
};

static_assert(HopperRows::kWritesRows && policy::WritesRows<HopperRows>);

// HopperRows reading Q, K and V straight from the QKV product's rows (policy::ReadsQkvRows), the
// change optimized_gpt2_step_fused_bf16_qkv_rows.cu teaches: the kernels' tensor maps run over the
// rows (flashtma::rows_maps: a token's row of 3 heads hd values, head h's hd columns at h hd of each
// third), where they ran over a copy by head. At head sizes the kernels take as they are (64 and
// 128: a head's columns are a whole box); at others the step lays Q, K and V out by head, padded,
// as before.
struct HopperQkvRows : HopperRows {
  static constexpr bool kReadsQkvRows = true;
  using HopperRows::HopperRows;
  static bool qkv_rows(const gpt2::Config& c) { return hopper(c.head_dim()); }

  void forward_qkv_rows(const __nv_bfloat16* qkv, __nv_bfloat16* att, float* lse, int batch, int heads, int seq,
                        int hd, bool causal, float scale, cudaStream_t stream) {
    const std::size_t dm = std::size_t(heads) * hd;
    flashtma::launch<Schedule>(flashtma::rows_maps(qkv, qkv + dm, qkv + 2 * dm, std::size_t(batch) * seq, heads, hd,
                                                   3 * dm),
                               nullptr, lse, batch * heads, seq, hd, causal, scale * flash::kLog2e, stream, {},
                               o_rows(att, heads, hd));
  }

  void backward_qkv_rows(const __nv_bfloat16* qkv, const __nv_bfloat16* dout, const float* lse, const float* delta,
                         float* dq, __nv_bfloat16* dqkv, float* db, int batch, int heads, int seq, int hd,
                         bool causal, float scale, cudaStream_t stream) {
    const std::size_t dm = std::size_t(heads) * hd;
    flashtma::bwd::launch(flashtma::bwd::rows_maps(qkv, qkv + dm, qkv + 2 * dm, 3 * dm, dout, dq, batch * heads, heads,
                                                   seq, hd, kBackwardConsumers),
                          lse, delta, nullptr, nullptr, batch * heads, seq, hd, causal, scale, stream,
                          kv_rows(dqkv, db, heads, hd));
  }
};

static_assert(policy::ReadsQkvRows<HopperQkvRows>);

}  // namespace
