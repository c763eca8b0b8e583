// A register probe for the 80-query plan (README.md here), not a kernel of the lab: the consumer's loop
// at d = 128 with 80-query tiles reduced to what holds registers, so that ptxas says whether 240
// registers a consumer thread hold it without spills. It is compiled by hand and never run:
//   nvcc -std=c++20 -O3 --generate-code=arch=compute_90a,code=[sm_90a] -Xptxas -v -c \
//     -I ch04_compile_vs_fused -I common ch04_compile_vs_fused/results/attention_backward_m80_plan_s98/regs_probe.cu \
//     -o /tmp/regs_probe.o
// Per query tile, as the plan's table: S^T and dP^T (64 keys x 80 queries, 8 m64n80k16 each over d),
// P^T and dS^T packed to bf16 A fragments, dS^T stored to shared memory, dV += P^T dO and
// dK += dS^T Q (5 m64n128k16 each, A from registers), then dQ^T = K^T dS^T (64 of d x 80 queries, 8
// m64n80k16 over the 128 keys) stored to shared memory; dV and dK (64 x 128 each) live across tiles.
// The shared-memory addresses are placeholders: only the registers' lifetimes are real.
#include <cuda_bf16.h>

#include <cstdint>

#include "attention/kernels/wgmma.cuh"

namespace probe {

#define R40                                                                                                        \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39"
#define D40                                                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),     \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),     \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),    \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),    \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])

// d (64 x 80, f32) = a (64 x 16) b (16 x 80) [+ d], both bf16 in shared memory.
template <int TransA, int TransB>
__device__ __forceinline__ void mma_ss_n80(float (&d)[40], std::uint64_t a, std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {" R40 "}, %40, %41, p, 1, 1, %43, %44;\n}\n"
      : D40
      : "l"(a), "l"(b), "r"(int(accumulate)), "n"(TransA), "n"(TransB));
}

__device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return reinterpret_cast<const std::uint32_t&>(v);
}

#ifndef PROBE_REGS
#define PROBE_REGS 240  // a consumer's registers, as Bwd::kConsumerRegs at two consumers
#endif

// S^T, dP^T or dQ^T (64 x Br): m64n80k16 at Br = 80, the lab's m64n64k16 at 64.
template <int Br, int TransA, int TransB>
__device__ __forceinline__ void mma_n(float (&d)[Br / 2], std::uint64_t a, std::uint64_t b, bool accumulate) {
  if constexpr (Br == 80)
    mma_ss_n80<TransA, TransB>(d, a, b, accumulate);
  else
    wgmma::mma_ss<TransA, TransB>(d, a, b, accumulate);
}

template <int Br>
__global__ void __launch_bounds__(384, 1) consumer_loop(const float* __restrict__ lse, const float* __restrict__ delta,
                                                        float* __restrict__ out, int tiles, float scale_log2) {
  constexpr int kJ = Br / 8, kA = 4 * kJ, kTile = Br * 128;  // column groups, accumulators, a Q region's bytes
  extern __shared__ __align__(1024) std::uint8_t smem[];
  const int group = int(threadIdx.x) / 128;
  if (group == 0) {
    wgmma::setmaxnreg_dec<24>();
    return;
  }
  wgmma::setmaxnreg_inc<PROBE_REGS>();
  const int consumer = group - 1, me = int(threadIdx.x % 128), lane = me % 32, t = lane % 4;
  float dk[64] = {}, dv[64] = {};
  std::uint8_t* k = smem;             // K: 128 keys x 128 (two regions)
  std::uint8_t* v = smem + 32768;     // V
  std::uint8_t* q = smem + 65536;     // Q tile: 80 x 128
  std::uint8_t* dout = smem + 86016;  // dO tile
  std::uint8_t* ds = smem + 106496 + consumer * 10240;  // this consumer's dS (80 queries x 64 keys)
  float* dqs = reinterpret_cast<float*>(smem + 126976 + consumer * 20480);
  float* rows = reinterpret_cast<float*>(smem + 167936 + consumer * 640);
  for (int i = 0; i < tiles; ++i) {
    float s[kA], dp[kA];
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
      mma_n<Br, 0, 0>(s, wgmma::descriptor(k + consumer * 8192 + (kk / 4) * 16384) + 2 * (kk % 4),
                      wgmma::descriptor(q + (kk / 4) * kTile) + 2 * (kk % 4), kk > 0);
    wgmma::commit();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
      mma_n<Br, 0, 0>(dp, wgmma::descriptor(v + consumer * 8192 + (kk / 4) * 16384) + 2 * (kk % 4),
                      wgmma::descriptor(dout + (kk / 4) * kTile) + 2 * (kk % 4), kk > 0);
    wgmma::commit();
    if (me < Br) rows[me] = lse[i * Br + me], rows[Br + me] = delta[i * Br + me];
    wgmma::wait<1>();
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[4 * j + e] = exp2f(fmaf(s[4 * j + e], scale_log2, -rows[8 * j + 2 * t + (e & 1)]));
    wgmma::wait<0>();
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[4 * j + e] = s[4 * j + e] * (dp[4 * j + e] - rows[Br + 8 * j + 2 * t + (e & 1)]);
    std::uint32_t pa[kJ / 2][4], da[kJ / 2][4];
#pragma unroll
    for (int kk = 0; kk < kJ / 2; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        pa[kk][r] = pack(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]), da[kk][r] = pack(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
#pragma unroll
    for (int kk = 0; kk < kJ / 2; ++kk)  // dS, transposed: placeholder addresses, one word a fragment
#pragma unroll
      for (int r = 0; r < 4; ++r) reinterpret_cast<std::uint32_t*>(ds)[(kk * 4 + r) * 128 + me] = da[kk][r];
    wgmma::fence_proxy_async();
    asm volatile("bar.sync %0, 256;\n" ::"r"(3) : "memory");  // both consumers' dS written
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kJ / 2; ++kk) {
      wgmma::mma_rs_n128<1>(dv, pa[kk], wgmma::descriptor_mn(dout + kk * 2048, kTile));
      wgmma::mma_rs_n128<1>(dk, da[kk], wgmma::descriptor_mn(q + kk * 2048, kTile));
    }
    wgmma::commit();
    wgmma::wait<0>();
    float dq[kA];
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)  // K^T (d rows of this consumer) by dS over the block's 128 keys
      mma_n<Br, 1, 0>(dq, wgmma::descriptor_mn(k + consumer * 16384 + kk * 2048, 16384),
                      wgmma::descriptor(smem + 106496 + (kk / 4) * 10240) + 2 * (kk % 4), kk > 0);
    wgmma::commit();
    wgmma::wait<0>();
#pragma unroll
    for (int e = 0; e < kA; ++e) dqs[e * 128 + me] = dq[e] * scale_log2;  // placeholder mailbox
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
  }
#pragma unroll
  for (int e = 0; e < 64; ++e) out[(2 * e) * 256 + 128 * consumer + me] = dk[e], out[(2 * e + 1) * 256 + 128 * consumer + me] = dv[e];
}

template __global__ void consumer_loop<64>(const float*, const float*, float*, int, float);
template __global__ void consumer_loop<80>(const float*, const float*, float*, int, float);

}  // namespace probe
