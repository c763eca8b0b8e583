// Fused attention forward at d = 128 on Hopper's warpgroup wgmma: the previous step's algorithm
// (online softmax over K/V tiles, bf16 inputs, fp32 accumulation, P kept in registers), with the
// two products moved from mma.sync, one warp at a time, to wgmma, four warps (a warpgroup) at a
// time with operands read by the tensor cores straight from shared memory. mma.sync needs every
// K and V fragment loaded from shared memory into registers first (ldmatrix), and those loads
// cap the tensor cores; wgmma reads the tiles by descriptor, with no register copy, and issues a
// 64 x 64 x 16 product per instruction instead of 16 x 8 x 16. wgmma exists only in the
// architecture-specific target sm_90a: the build compiles this file for it when it builds for
// sm_90 (the line below, read by cmake/Lab.cmake), and elsewhere the variant reports N/A, as it
// does for d other than 128.
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_attention_fused_wgmma
#include <string>

#include "attention/attention.cuh"
#include "attention/kernels/flash_tiles.cuh"
#include "lab/device.hpp"
#include "attention/kernels/mma_tiles.cuh"
#if defined(LAB_SM90A)
#include "attention/kernels/wgmma.cuh"
#endif

namespace {

#if defined(LAB_SM90A)
// Two warpgroups of 4 warps, each owning 64 queries: S = Q K^T is one m64n64k16 wgmma per 16 of d
// with Q and K read from shared memory by descriptor, O += P V one m64n128k16 per 16 keys with P
// from registers (the accumulators packed to bf16, as in the mma.sync kernel) and V^T from shared
// memory. V^T, with each head's seq rounded up to 64 (zeros), is made from V by a transpose kernel
// at every call (timed), so that both products read K-major tiles. The softmax, the mask, the copy
// schedule and the output are the mma.sync kernel's helpers: the wgmma accumulator layout is
// mma's, warp by warp. Two blocks an SM (kMinBlocks: 128 registers a thread, about 100 bytes
// spilled) beat one block with 172 registers, and 64-key tiles beat 128-key ones: the measured
// times are in the chapter README. The products here still wait for each wgmma before the softmax;
// overlapping the next tile's Q K^T with this tile's softmax (FlashAttention-3) is the next step.
namespace wg {
constexpr int kGroups = 2, kThreads = 128 * kGroups, kBr = 64 * kGroups, kBc = 64, D = 128, kMinBlocks = 2;
constexpr int kQ = kBr * D / 8, kK = kBc * D / 8, kV = D * kBc / 8;  // tiles, in 16-byte chunks
constexpr int kSmemBytes = 16 * (kQ + kK + kV);
}  // namespace wg

template <bool Causal>
__global__ void __launch_bounds__(wg::kThreads, wg::kMinBlocks)
    flash_forward_wgmma(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                        const __nv_bfloat16* __restrict__ vt, float* __restrict__ o, float* __restrict__ lse, int seq,
                        int seq_padded, float scale_log2) {
  constexpr int kBr = wg::kBr, kBc = wg::kBc, D = wg::D, kT = wg::kThreads;
  extern __shared__ __align__(1024) uint4 smem[];
  uint4* qs = smem;       // Q: two regions (d 0-63, 64-127) of kBr rows
  uint4* ks = qs + wg::kQ;    // K tile: two regions of kBc rows
  uint4* vs = ks + wg::kK;    // V^T tile: one region of D rows (64 keys a row)
  if (threadIdx.x == 0 && (mma::smem_address(smem) & 1023) != 0) __trap();  // the swizzle needs it
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, group = warp / 4;
  const int tile = Causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int row0 = tile * kBr;
  const std::size_t head = std::size_t(blockIdx.y) * seq * D;
  q += head, k += head, o += head;
  vt += std::size_t(blockIdx.y) * D * seq_padded;

  wgmma::load_async<kBr, D, kT>(qs, q, D, row0, seq, 0);
  wgmma::load_async<kBc, D, kT>(ks, k, D, 0, seq, 0);
  mma::cp_async_commit();  // copy groups: Q and K tile 0; V tile 0; then per tile K kt + 1, V kt + 1
  wgmma::load_async<D, kBc, kT>(vs, vt, seq_padded, 0, D, 0);
  mma::cp_async_commit();

  float acc[1][D / 8][4] = {};
  mma::Softmax<1> softmax;  // each row's running max and sum
  const int qrow0 = row0 + 64 * group + 16 * (warp % 4) + g;  // this lane's rows: qrow0, qrow0 + 8
  const int last = Causal ? min(seq, row0 + kBr) : seq;
  const int tiles = (last + kBc - 1) / kBc;
  float s[1][kBc / 8][4];
  const uint4* qg = qs + 64 * group * 8;  // the warpgroup's 64 rows of Q
  mma::sweep_kv<true>(
      tiles, [&](int kt) { wgmma::load_async<kBc, D, kT>(ks, k, D, kt * kBc, seq, 0); },
      [&](int kt) { wgmma::load_async<D, kBc, kT>(vs, vt, seq_padded, 0, D, kt * kBc); },
      [&](int) {
        float(&sd)[kBc / 2] = reinterpret_cast<float(&)[kBc / 2]>(s);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {  // region kk / 4, its (kk % 4)-th 32 bytes
          const std::uint64_t da = wgmma::descriptor(qg + (kk / 4) * kBr * 8) + 2 * (kk % 4);
          const std::uint64_t db = wgmma::descriptor(ks + (kk / 4) * kBc * 8) + 2 * (kk % 4);
          wgmma::mma_ss(sd, da, db, kk > 0);
        }
        wgmma::commit();
        wgmma::wait<0>();
      },
      [&](int kt) {
        mma::mask_scores<Causal>(s, kt * kBc, row0, qrow0, seq);
        softmax.tile(s, scale_log2, acc);
      },
      [&](int) {
        std::uint32_t a[kBc / 16][4];
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk) {
          a[kk][0] = mma::pack_bf16(s[0][2 * kk][0], s[0][2 * kk][1]);
          a[kk][1] = mma::pack_bf16(s[0][2 * kk][2], s[0][2 * kk][3]);
          a[kk][2] = mma::pack_bf16(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
          a[kk][3] = mma::pack_bf16(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
        }
        float(&od)[D / 2] = reinterpret_cast<float(&)[D / 2]>(acc);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk)  // region kk / 4 of V^T (64 keys a region)
          wgmma::mma_rs_n128(od, a[kk], wgmma::descriptor(vs + (kk / 4) * D * 8) + 2 * (kk % 4));
        wgmma::commit();
        wgmma::wait<0>();
      });
  softmax.write(acc, o, lse + std::size_t(blockIdx.y) * seq, qrow0, seq);
}
#endif


// The variant's state: the bf16 copies of Q, K and V, and V^T (each head's seq rounded up to 64).
struct Wgmma {
  using Topic = Attention;
  attn::Bf16Inputs in16;
  int seq_padded;
  lab::DeviceBuffer<__nv_bfloat16> vt16;
  Wgmma(const Attention::Problem& p, cudaStream_t stream)
      : in16(p, stream), seq_padded((p.dims.seq + 63) / 64 * 64), vt16(std::size_t(p.dims.bh()) * 128 * seq_padded) {}
  // bf16, its running max kept over tiles of kBc keys (the check emulates its rounding of P).
  static lab::Declared declared() {
    return {.precision = "bf16", .writes = {"lse"},
            .schedule = [](const lab::Shape&) { return std::any(attn::ForwardSchedule(wg::kBc)); }};
  }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) {
#if defined(LAB_SM90A)
    if (dev.cc_major != 9 || dev.cc_minor != 0) return "wgmma needs an sm_90 GPU (this one is " + dev.arch() + ")";
    return attn::Dims(s).d == 128 ? "" : "the wgmma kernel is written for d = 128";
#else
    (void)s, (void)dev;
    return std::string("wgmma needs a build for sm_90a (this one is for ") + lab::built_architectures() + ")";
#endif
  }

  void run(Attention::Problem& p, cudaStream_t stream) {
#if defined(LAB_SM90A)
    const attn::Dims& a = p.dims;
    attn::transpose_bf16(in16.v.data(), vt16.data(), a.bh(), a.seq, 128, seq_padded, stream);
    auto kernel = a.causal ? flash_forward_wgmma<true> : flash_forward_wgmma<false>;
    LAB_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wg::kSmemBytes));
    const dim3 grid((a.seq + wg::kBr - 1) / wg::kBr, a.bh());
    kernel<<<grid, wg::kThreads, wg::kSmemBytes, stream>>>(in16.q.data(), in16.k.data(), vt16.data(), p.o.data(),
                                                          p.lse.data(), a.seq, seq_padded, a.scale() * flash::kLog2e);
    LAB_CHECK(cudaGetLastError());
#else
    (void)p, (void)stream;
    throw lab::Error("optimized_attention_fused_wgmma: not built for sm_90a");
#endif
  }
};
}  // namespace

LAB_VARIANT_CLASS_STEP(Wgmma, LAB_STEP, "fused on Hopper's wgmma (d = 128, sm_90a): operands from shared memory by descriptor");
