// The online softmax, FlashAttention's: a row's softmax over keys that arrive a tile at a time,
// kept as a running max m and a running sum l of exp2(s - m) (scores in units of log2, s scale
// log2 e). A tile with a larger max moves m up and rescales what was summed (and the output
// accumulated) under the old one by alpha = exp2(m_old - m_new); at the end O = acc / l and
// lse = (m + log2 l) / log2 e. Every flash forward of the chapter updates its rows through these
// two functions, whatever the layout of its scores in registers: the fp32 kernels on the SIMT
// units (flash_fp32.cuh, exact exp2f), and through mma::Softmax the 3xTF32 and bf16 kernels on
// mma.sync and the Hopper steps on wgmma (the MUFU's exp2, exp2_ftz).
#pragma once

#include <cmath>

namespace online_softmax {

// 2^x with denormal results flushed to zero: one MUFU.EX2 (exp2f handles denormal results, which
// takes extra instructions around it; a probability below 2^-126 of the row's largest is 0 for
// any tolerance here).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
struct Exp2 {  // exp2f: correctly handles every result (the fp32 kernels)
  __device__ __forceinline__ float operator()(float x) const { return exp2f(x); }
};
struct Exp2Ftz {  // exp2_ftz (the tensor-core kernels)
  __device__ __forceinline__ float operator()(float x) const { return exp2_ftz(x); }
};

// A row's new running max, given the old one and the tile's max (both in units of log2), and the
// factor alpha = exp2(m_old - m_new) that brings what was summed under the old max to the new one.
// Finite once the first tile is in (every row has key 0); a row whose keys in a tile are all
// masked keeps its max (its probabilities there are exp2(-inf) = 0).
struct Max {
  float m, alpha;
};
template <class Exp>
__device__ __forceinline__ Max new_max(float m_old, float tile_max) {
  const float m = fmaxf(m_old, tile_max);
  return {m, Exp{}(m_old - m)};
}

// The running sum after a tile: what was summed, rescaled, plus the tile's sum of exp2(s - m_new).
__device__ __forceinline__ float running_sum(float l, float alpha, float tile_sum) { return l * alpha + tile_sum; }

}  // namespace online_softmax
