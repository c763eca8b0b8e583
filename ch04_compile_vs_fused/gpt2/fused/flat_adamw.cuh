// AdamW over a flat buffer of parameters: the fused GPT-2 step's optimizer (gpt2/fused/step.cuh runs it
// a stage at a time, overlapping the backward) and the PyTorch bridge's adamw_ operator. The
// parameters, gradients and both moments are each one array, so a single launch updates every
// tensor of the model (what PyTorch calls a multi-tensor step, without its table of tensor
// pointers), with 16-byte accesses: 28 bytes moved a parameter, the least AdamW can move.
//
// torch.optim.AdamW's arithmetic at step t (>= 1):
//   p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

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
// quads inside the range, then its at most 3 + 3 loose ends, one a thread of block 0.
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, std::size_t begin, std::size_t end, Coef coef, Hyper h) {
  const float step_size = coef.device ? coef.device[0] : coef.step_size;
  const float inv_sqrt_bc2 = coef.device ? coef.device[1] : coef.inv_sqrt_bc2;
  auto one = [&](float& pp, float& mm, float& vv, float gg) { update(pp, mm, vv, gg, step_size, inv_sqrt_bc2, h); };
  const std::size_t up = (begin + 3) / 4 * 4, down = end / 4 * 4;
  const std::size_t a = up < end ? up : end, b = down > a ? down : a;  // the quads lie in [a, b)
  auto* p4 = reinterpret_cast<float4*>(p) + a / 4;
  auto* m4 = reinterpret_cast<float4*>(m) + a / 4;
  auto* v4 = reinterpret_cast<float4*>(v) + a / 4;
  const auto* g4 = reinterpret_cast<const float4*>(g) + a / 4;
  for (std::size_t i : lab::grid_stride((b - a) / 4)) {
    float4 pi = p4[i], mi = m4[i], vi = v4[i];
    const float4 gi = g4[i];
    one(pi.x, mi.x, vi.x, gi.x), one(pi.y, mi.y, vi.y, gi.y), one(pi.z, mi.z, vi.z, gi.z), one(pi.w, mi.w, vi.w, gi.w);
    p4[i] = pi, m4[i] = mi, v4[i] = vi;
  }
  if (blockIdx.x == 0) {
    const std::size_t t = threadIdx.x, head = a - begin;
    const std::size_t i = t < head ? begin + t : b + (t - head);
    if (t < head + (end - b)) one(p[i], m[i], v[i], g[i]);
  }
}

// One step over [begin, end) of p, g, m, v (each 16-byte aligned), on `stream`.
void step(float* p, const float* g, float* m, float* v, std::size_t begin, std::size_t end, Coef coef,
                 Hyper h, cudaStream_t stream) {
  if (end <= begin) return;
  adamw_kernel<<<lab::grid_for((end - begin) / 4 + 1, kThreads), kThreads, 0, stream>>>(p, g, m, v, begin, end,
                                                                                       coef, h);
  LAB_CHECK(cudaGetLastError());
}

}  // namespace
}  // namespace flat_adamw
