// The attention operators of the bridge: the fused kernels' launchers, as the chapter's fused
// variants and the GPT-2 step call them (see bridge.hpp).
#include <stdexcept>

#include "attention/attention.cuh"
#include "bridge.hpp"
#include "attention/kernels/flash_3xtf32.cuh"
#include "attention/kernels/flash_bf16.cuh"
#include "attention/kernels/flash_fp32.cuh"

namespace bridge {

std::string attention_validate(std::int64_t batch, std::int64_t heads, std::int64_t seq, std::int64_t d) {
  return attn::Shapes::validate(lab::Shape{batch, heads, seq, d, 0});
}

void attention_forward(const std::string& precision, int batch, int heads, int seq, int d, bool causal, const void* q,
                       const void* k, const void* v, float* o, float* lse, cudaStream_t s) {
  const int bh = batch * heads;
  const float scale = 1.0f / std::sqrt(float(d));
  if (precision == "fp32") {
    flash::forward(static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v), o, lse, bh,
                   seq, d, causal, scale, s);
  } else if (precision == "3xtf32") {
    flash3x::forward(static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v), o, lse,
                     bh, seq, d, causal, scale, s);
  } else if (precision == "bf16") {
    flashbf16::forward(static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
                       static_cast<const __nv_bfloat16*>(v), o, lse, bh, seq, d, causal, scale, s);
  } else {
    throw std::invalid_argument("no attention precision '" + precision + "' (fp32, 3xtf32, bf16)");
  }
}

void attention_backward(const std::string& precision, int batch, int heads, int seq, int d, bool causal,
                        const void* q, const void* k, const void* v, const void* dout, const float* dout_fp32,
                        const float* o, const float* lse, float* delta, float* dq, float* dk, float* dv,
                        cudaStream_t s) {
  if (precision != "fp32" && precision != "3xtf32" && precision != "bf16")
    throw std::invalid_argument("no attention precision '" + precision + "' (fp32, 3xtf32, bf16)");
  const int bh = batch * heads;
  const float scale = 1.0f / std::sqrt(float(d));
  const std::size_t rows = std::size_t(bh) * seq;
  // The fused backward's prologue (attn::SavedOutput::prologue): delta, and dQ zeroed for its atomics.
  flash::row_dot(dout_fp32, o, delta, rows, d, s);
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaMemsetAsync(dq, 0, rows * d * sizeof(float), s));
  if (precision == "fp32") {
    flash::backward(static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v),
                    static_cast<const float*>(dout), lse, delta, dq, dk, dv, bh, seq, d, causal, scale, s);
  } else if (precision == "3xtf32") {
    flash3x::backward(static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v),
                      static_cast<const float*>(dout), lse, delta, dq, dk, dv, bh, seq, d, causal, scale, s);
  } else {
    flashbf16::backward(static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
                        static_cast<const __nv_bfloat16*>(v), static_cast<const __nv_bfloat16*>(dout), lse, delta, dq,
                        dk, dv, bh, seq, d, causal, scale, s);
  }
}

}  // namespace bridge
