// AdamW over a flat buffer of parameters: the fused GPT-2 step's optimizer (gpt2/fused/step.cuh runs it
// a stage at a time, overlapping the backward) and the PyTorch bridge's adamw_ operator. The
// parameters, gradients and both moments are each one array, so a single launch updates every
// tensor of the model (what PyTorch calls a multi-tensor step, without its table of tensor
// pointers), with 16-byte accesses: 28 bytes moved a parameter, the least AdamW can move. Given a
// `copy`, it also writes each updated parameter rounded to bf16 there (30 bytes a parameter): the
// copy the next step's bf16 products read, which a pass of its own made from the stored parameters
// before (optimized_gpt2_step_fused_bf16_adamw_rounds.cu).
//
// torch.optim.AdamW's arithmetic at step t (>= 1):
//   p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lab/check.hpp"
#include "lab/launch.hpp"

namespace flat_adamw {

// The step's constants in fp32, each rounded once from double: 1 - b1 and 1 - b2 so (in fp32,
// 1 - 0.999f is 1.3e-5 off 0.001), and the decay 1 - lr wd.
struct Hyper {
  float decay, b1, b2, one_b1, one_b2, eps;
  static Hyper of(double lr, double beta1, double beta2, double eps, double weight_decay) {
    return {float(1 - lr * weight_decay), float(beta1), float(beta2), float(1 - beta1), float(1 - beta2), float(eps)};
  }
};

// The step's bias corrections {lr / (1 - b1^t), 1 / sqrt(1 - b2^t)}: by value, or (device not null)
// read from device memory at run time, so that a captured CUDA graph replays each step with the
// step's own values written there before the launch.
struct Coef {
  float step_size = 0, inv_sqrt_bc2 = 0;
  const float* device = nullptr;
  static Coef at_step(double lr, double beta1, double beta2, long long step) {
    const double bc1 = 1 - std::pow(beta1, double(step)), bc2 = 1 - std::pow(beta2, double(step));
    return {float(lr / bc1), float(1 / std::sqrt(bc2))};
  }
};

inline constexpr int kThreads = 256;

// One parameter's update, the arithmetic above in fp32 (step_size and inv_sqrt_bc2: Coef's, read once
// a thread); the bridge's list kernel (python/csrc/bridge_adamw.cu) runs the same.
__device__ __forceinline__ void update(float& pp, float& mm, float& vv, float gg, float step_size, float inv_sqrt_bc2,
                                       const Hyper& h) {
  mm = h.b1 * mm + h.one_b1 * gg;
  vv = h.b2 * vv + h.one_b2 * gg * gg;
  pp = pp * h.decay - step_size * (mm / (sqrtf(vv) * inv_sqrt_bc2 + h.eps));
}

namespace {

// The parameters [begin, end) of the four arrays, each 16-byte aligned: 16-byte accesses to the
// quads inside the range, then its at most 3 + 3 loose ends, one a thread of block 0. copy (may be
// null): parameter i's bf16 value at copy[i - begin], rounded to nearest, ties to even, as
// round_kernel rounds it (kernels.cuh): 8-byte stores where begin is a multiple of 4 (copy then
// 8-byte aligned: step() asks), else one value at a time.
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, std::size_t begin, std::size_t end, Coef coef, Hyper h,
                             __nv_bfloat16* __restrict__ copy) {
  const float step_size = coef.device ? coef.device[0] : coef.step_size;
  const float inv_sqrt_bc2 = coef.device ? coef.device[1] : coef.inv_sqrt_bc2;
  auto one = [&](float& pp, float& mm, float& vv, float gg) { update(pp, mm, vv, gg, step_size, inv_sqrt_bc2, h); };
  const std::size_t up = (begin + 3) / 4 * 4, down = end / 4 * 4;
  const std::size_t a = up < end ? up : end, b = down > a ? down : a;  // the quads lie in [a, b)
  auto* p4 = reinterpret_cast<float4*>(p) + a / 4;
  auto* m4 = reinterpret_cast<float4*>(m) + a / 4;
  auto* v4 = reinterpret_cast<float4*>(v) + a / 4;
  const auto* g4 = reinterpret_cast<const float4*>(g) + a / 4;
  __nv_bfloat16* const c = copy ? copy + (a - begin) : nullptr;  // the copy of quad 0's first parameter
  const bool quads = a == begin;                                  // c 8-byte aligned: 4 values a store
  for (std::size_t i : lab::grid_stride((b - a) / 4)) {
    float4 pi = p4[i], mi = m4[i], vi = v4[i];
    const float4 gi = g4[i];
    one(pi.x, mi.x, vi.x, gi.x), one(pi.y, mi.y, vi.y, gi.y), one(pi.z, mi.z, vi.z, gi.z), one(pi.w, mi.w, vi.w, gi.w);
    p4[i] = pi, m4[i] = mi, v4[i] = vi;
    if (c) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(pi.x, pi.y), hi = __floats2bfloat162_rn(pi.z, pi.w);
      if (quads) {
        reinterpret_cast<uint2*>(c)[i] = make_uint2(reinterpret_cast<const unsigned&>(lo),
                                                     reinterpret_cast<const unsigned&>(hi));
      } else {
        c[4 * i] = lo.x, c[4 * i + 1] = lo.y, c[4 * i + 2] = hi.x, c[4 * i + 3] = hi.y;
      }
    }
  }
  if (blockIdx.x == 0) {
    const std::size_t t = threadIdx.x, head = a - begin;
    const std::size_t i = t < head ? begin + t : b + (t - head);
    if (t < head + (end - b)) {
      one(p[i], m[i], v[i], g[i]);
      if (copy) copy[i - begin] = __float2bfloat16_rn(p[i]);
    }
  }
}

// One step over [begin, end) of p, g, m, v (each 16-byte aligned), on `stream`; with `copy`, the
// updated parameters' bf16 values there too (copy[i - begin]; 8-byte aligned where begin is a
// multiple of 4).
void step(float* p, const float* g, float* m, float* v, std::size_t begin, std::size_t end, Coef coef,
                 Hyper h, cudaStream_t stream, __nv_bfloat16* copy = nullptr) {
  if (end <= begin) return;
  if (copy && begin % 4 == 0 && reinterpret_cast<std::uintptr_t>(copy) % 8 != 0)
    throw lab::Error("flat_adamw::step: the bf16 copy of a range starting at a multiple of 4 must be 8-byte aligned");
  adamw_kernel<<<lab::grid_for((end - begin) / 4 + 1, kThreads), kThreads, 0, stream>>>(p, g, m, v, begin, end,
                                                                                       coef, h, copy);
  LAB_CHECK(cudaGetLastError());
}

}  // namespace
}  // namespace flat_adamw
