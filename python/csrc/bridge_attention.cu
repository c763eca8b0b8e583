// The attention operators of the bridge: the fused kernels' launchers, as the chapter's fused
// variants and the GPT-2 step call them (see bridge.hpp).
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "attention/attention.cuh"
#include "bridge.hpp"
#include "storage16.cuh"
#include "attention/kernels/flash_3xtf32.cuh"
#include "attention/kernels/flash_bf16.cuh"
#include "attention/kernels/flash_fp32.cuh"

namespace bridge {

std::string attention_validate(std::int64_t batch, std::int64_t heads, std::int64_t seq, std::int64_t d,
                               bool sixteen_bits) {
  // The 16-bit kernels (flash_bf16.cuh, compiled here for flashbf16::kWidestHead) also take d = 256;
  // fp32's stop at 128.
  return attn::Shapes::validate(lab::Shape{batch, heads, seq, d, 0}, sixteen_bits ? flashbf16::kWidestHead : 128);
}

void attention_forward(const std::string& precision, int batch, int heads, int seq, int d, bool causal, const void* q,
                       const void* k, const void* v, float* o, float* lse, float scale, cudaStream_t s) {
  const int bh = batch * heads;
  if (precision == "fp32") {
    flash::forward(static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v), o, lse, bh,
                   seq, d, causal, scale, s);
  } else if (precision == "3xtf32") {
    flash3x::forward(static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v), o, lse,
                     bh, seq, d, causal, scale, s);
  } else if (precision == "bf16" || precision == "fp16") {
    on16(precision == "bf16" ? Storage::bf16 : Storage::fp16, "the 16-bit attention", [&](auto t) {
      using T = typename decltype(t)::type;
      flashbf16::forward<T, flashbf16::kWidestHead>(static_cast<const T*>(q), static_cast<const T*>(k),
                                                    static_cast<const T*>(v), o, lse, bh, seq, d, causal, scale, s);
    });
  } else {
    throw std::invalid_argument("no attention precision '" + precision + "' (fp32, 3xtf32, bf16, fp16)");
  }
}

void attention_backward(const std::string& precision, int batch, int heads, int seq, int d, bool causal,
                        const float* q, const float* k, const float* v, const float* dout, const float* o,
                        const float* lse, float* delta, float* dq, float* dk, float* dv, float scale,
                        cudaStream_t s) {
  if (precision != "fp32" && precision != "3xtf32")
    throw std::invalid_argument("no fp32 attention precision '" + precision + "' (fp32, 3xtf32)");
  const int bh = batch * heads;
  const std::size_t rows = std::size_t(bh) * seq;
  // The fused backward's prologue (attn::SavedOutput::prologue): delta, and dQ zeroed for its atomics.
  flash::row_dot(dout, o, delta, rows, d, s);
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaMemsetAsync(dq, 0, rows * d * sizeof(float), s));
  if (precision == "fp32")
    flash::backward(q, k, v, dout, lse, delta, dq, dk, dv, bh, seq, d, causal, scale, s);
  else
    flash3x::backward(q, k, v, dout, lse, delta, dq, dk, dv, bh, seq, d, causal, scale, s);
}

namespace {
// Row g = (b heads + h) seq + t of a [batch][heads][seq][d] tensor, as 32-bit indices (the shapes
// hold fewer than 2^31 elements: attn::Shapes::validate): a 64-bit division is a long sequence of
// instructions, and with four a row a first form of the delta kernel took 12 us at GPT-2 small's
// shape (H200), four times its bytes' time.
struct RowOf {
  unsigned b, h, t;
  __device__ RowOf(unsigned g, unsigned heads, unsigned seq) {
    const unsigned bh = g / seq;
    t = g - bh * seq, b = bh / heads, h = bh - b * heads;
  }
  __device__ std::size_t at(const BhtStrides& s) const {
    return std::size_t(b) * s.b + std::size_t(h) * s.h + std::size_t(t) * s.t;
  }
};

// Eight 16-bit values of T (16 bytes; bf16 or fp16) as floats.
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&f)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 x;
    if constexpr (std::is_same_v<T, __half>)
      x = __half22float2(reinterpret_cast<const __half2*>(&raw)[i]);
    else
      x = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(&raw)[i]);
    f[2 * i] = x.x, f[2 * i + 1] = x.y;
  }
}

// Two floats as a pair of T, rounded to nearest, even (the low half the first).
template <class T>
__device__ __forceinline__ std::uint32_t pair_of(float a, float b) {
  std::uint32_t out;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(a, b);
    memcpy(&out, &h, 4);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    memcpy(&out, &h, 4);
  }
  return out;
}

// delta[g] = sum_c dO[g][c] O[g][c] over 16-bit dO and O (T) of any strides (in elements, multiples
// of 8, the last dimension's 1): D / 8 lanes a row, 16 bytes a lane, the row's sum by shuffles
// within its lanes.
template <class T, int D>
__global__ void delta16_kernel(const T* __restrict__ dout, BhtStrides ds, const T* __restrict__ o, BhtStrides os,
                               float* __restrict__ delta, unsigned heads, unsigned seq, unsigned rows) {
  constexpr int kLanes = D / 8;
  const unsigned g = (blockIdx.x * blockDim.x + threadIdx.x) / kLanes;
  const int lane = threadIdx.x % kLanes;
  float acc = 0;
  if (g < rows) {  // no early return: every lane of the warp takes part in the shuffles
    const RowOf r(g, heads, seq);
    float x[8], y[8];
    load8(dout + r.at(ds) + 8 * lane, x);
    load8(o + r.at(os) + 8 * lane, y);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc += x[i] * y[i];
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) acc += __shfl_xor_sync(~0u, acc, off);
  if (g < rows && lane == 0) delta[g] = acc;
}

// dst[g] = T(src[g]): fp32 rows by head (dense) into 16-bit rows of any strides (multiples of 8
// elements), D / 8 lanes a row, 8 values a lane: both sides read and written 16 bytes a lane.
template <class T, int D>
__global__ void rows_to16_kernel(const float* __restrict__ src, T* __restrict__ dst, BhtStrides s, unsigned heads,
                                 unsigned seq, unsigned rows) {
  constexpr int kLanes = D / 8;
  const unsigned g = (blockIdx.x * blockDim.x + threadIdx.x) / kLanes;
  const int lane = threadIdx.x % kLanes;
  if (g >= rows) return;
  const RowOf r(g, heads, seq);
  const float4* in = reinterpret_cast<const float4*>(src + std::size_t(g) * D + 8 * lane);
  const float4 a = in[0], b = in[1];
  const uint4 out = {pair_of<T>(a.x, a.y), pair_of<T>(a.z, a.w), pair_of<T>(b.x, b.y), pair_of<T>(b.z, b.w)};
  *reinterpret_cast<uint4*>(dst + r.at(s) + 8 * lane) = out;
}


unsigned blocks_for_rows(std::size_t rows, int d) { return unsigned((rows * (d / 8) + 255) / 256); }
}  // namespace

void attention_delta16(Storage storage, int batch, int heads, int seq, int d, const void* dout,
                       BhtStrides dout_strides, const void* o, BhtStrides o_strides, float* delta, cudaStream_t s) {
  const std::size_t rows = std::size_t(batch) * heads * seq;
  if (rows == 0) return;
  on16(storage, "the 16-bit attention", [&](auto t) {
    using T = typename decltype(t)::type;
    flash::dispatch<flashbf16::kWidestHead>(d, false, [&](auto dc, auto) {  // d: 16 to kWidestHead (attention_validate)
      delta16_kernel<T, decltype(dc)::value><<<blocks_for_rows(rows, d), 256, 0, s>>>(
          static_cast<const T*>(dout), dout_strides, static_cast<const T*>(o), o_strides, delta, unsigned(heads),
          unsigned(seq), unsigned(rows));
    });
  });
  LAB_CHECK(cudaGetLastError());
}

void attention_rows_to16(Storage storage, int batch, int heads, int seq, int d, const float* src, void* dst,
                         BhtStrides dst_strides, cudaStream_t s) {
  const std::size_t rows = std::size_t(batch) * heads * seq;
  if (rows == 0) return;
  on16(storage, "the 16-bit attention", [&](auto t) {
    using T = typename decltype(t)::type;
    flash::dispatch<flashbf16::kWidestHead>(d, false, [&](auto dc, auto) {
      rows_to16_kernel<T, decltype(dc)::value><<<blocks_for_rows(rows, d), 256, 0, s>>>(
          src, static_cast<T*>(dst), dst_strides, unsigned(heads), unsigned(seq), unsigned(rows));
    });
  });
  LAB_CHECK(cudaGetLastError());
}

void attention_backward16(Storage storage, int batch, int heads, int seq, int d, bool causal, const void* q,
                          const void* k, const void* v, const void* dout, const float* lse, const float* delta,
                          float* dq, float* dk, float* dv, float scale, cudaStream_t s) {
  const int bh = batch * heads;
  on16(storage, "the 16-bit attention", [&](auto t) {
    using T = typename decltype(t)::type;
    LAB_CHECK(cudaMemsetAsync(dq, 0, std::size_t(bh) * seq * d * sizeof(float), s));  // the kernel's atomics add
    flashbf16::backward<T, flashbf16::kWidestHead>(static_cast<const T*>(q), static_cast<const T*>(k),
                                                   static_cast<const T*>(v), static_cast<const T*>(dout), lse, delta,
                                                   dq, dk, dv, bh, seq, d, causal, scale, s);
  });
}

}  // namespace bridge
