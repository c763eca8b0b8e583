// GELU's backward in the epilogue of the product that makes its input (optimized_gpt2_step_fused_bf16_gelu_in_product.cu
// tells the lesson): the MLP's second product's input gradient dact = dY W, written by cuBLAS in
// bf16 until step 20 and read back by gelu_backward_act_in_flight, is here made by a product of the
// lab's own whose epilogue does that kernel's work before the tile leaves the SM: dact rounded to
// bf16 (the value cuBLAS wrote), dh = dact gelu'(h) and act = gelu(h) written in bf16, and the
// column sums of the fp32 dh added into db. dact never goes to memory.
//
// The product (sm_90a): C (rows x cols) = A (rows x reduce) B (reduce x cols), A = dY and B = W as
// they lie (row-major, bf16; W is the layer's weight, out x in, so reduce = d and cols = 4 d).
// Persistent, a block an SM, 128 x 128 tiles, and three roles by warp:
//  - warp 0 copies 64-wide slices of the reduction (A 128 x 64, B 64 x 128, 32 KB a stage) through
//    the TMA into a ring of kStages stages, and each tile's h (or bias) into the tile's buffer;
//  - warps 4 to 7, one warpgroup, make each tile with m64n128k16 wgmma from shared memory (A
//    K-major, B N-major: wgmma's transposed B) and put it into one of two buffers in bf16;
//  - the other warps (7 or 11: kEpiWarps) do the epilogue's arithmetic from a buffer while the next
//    tile's products run, and the TMA stores the outputs (or, kDirect, they read h and write the
//    outputs themselves, sparing shared memory three quarters of the epilogue's traffic).
// The epilogue's arithmetic is the cost (erf and exp: about twice gelu_kernel's instructions): done
// by the warpgroup that made the products, in turns with a second one (session 84), four warps
// could not issue it under the other's products, and the fused product was slower than cuBLAS and
// the separate kernels. Here 7 or 11 warps share it, and the products' warpgroup never waits for
// it but to find a buffer free.
//
// The same product with another epilogue makes the MLP's first product with its bias and GELU
// (optimized_gpt2_step_fused_bf16_gelu_forward_in_product.cu: bias_gelu): h = X W^T + b rounded
// once to bf16, as cuBLASLt's bias epilogue wrote it, and act = gelu(h), which gelu_kernel made from
// it in a pass of its own; W there is read K-major, as it lies.
// lab-arch: sm_90a (compiled where the including file is; elsewhere dx_dgelu_fits() says no)
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpt2/fused/kernels.cuh"
#include "lab/check.hpp"

#if defined(LAB_SM90A)
#include "attention/kernels/wgmma.cuh"
#include "lab/tma.cuh"
#include "lab/tma.hpp"
#endif

namespace {  // as kernels.cuh's: each program (and test binary object) its own copy
namespace dgelu_product {

constexpr int kBm = 128, kBn = 128, kBk = 64, kStages = 3;
// The block: a copy warp, the products' warpgroup and EpiWarps epilogue warps (7: 384 threads, or
// 11: 512; the launches take kEpiWarps).
constexpr int kEpiWarps = 11;
// Where the epilogue's tensors go (Direct): through shared memory and the TMA (false: h in by the
// copy warp, dh and act, or h and act, out by TMA stores from the tile's buffer), or straight
// between the epilogue warps' registers and memory (true: each warp reads its rows of h with
// 8-byte loads issued a tile ahead and writes its outputs with 8-byte stores, a warp's row 256
// contiguous bytes). The products alone may keep shared memory near its rate (two m64n128k16 a
// step of 16 read A once and B twice: 96 bytes a cycle, of its 128 if the tensor cores' reads share
// them); through the TMA a tile's epilogue
// moves 256 KB more through it (h in, the warps' reads and writes, the stores' reads), directly
// 64 KB (the products' bf16 tile written and read once). The measured ping-pong product (session
// 84) pointed this way: storing its rows directly, its forward took 48.3 us against 53.0 for cuBLAS
// then gelu_kernel, and through the TMA 63.8 (its backward, which loaded h as it went, 91.5). Both
// forms are kept until a GPU has timed them.
constexpr bool kDirect = false;
// The forward's (bias_gelu's) own: on an H100 (session 85, the bench, bit for bit) the backward
// took 62.0 us with 11 warps through the TMA (62.8 with 7; directly 73.7 and 76.8) against 70.5
// for cuBLAS then gelu_backward_act_in_flight, and the forward 52.1 us directly with 7 warps (52.7
// with 11; through the TMA 52.8 and 55.8) against 52.7 for cuBLAS then gelu_kernel.
constexpr int kBiasGeluEpiWarps = 7;
constexpr bool kBiasGeluDirect = true;
__host__ __device__ constexpr int threads_for(int epi_warps) { return 32 * (5 + epi_warps); }
// Registers a thread by warpgroup: the products' (warps 4 to 7), and the others (the copies and the
// epilogue), within the SM's 65536.
constexpr int kMmaRegs = 232;
__host__ __device__ constexpr int other_regs(int epi_warps) { return epi_warps == 7 ? 136 : 88; }
static_assert((kMmaRegs + 2 * other_regs(7)) * 128 <= 65536 && (kMmaRegs + 3 * other_regs(11)) * 128 <= 65536);
constexpr int kABytes = kBm * kBk * 2, kBBytes = kBk * kBn * 2;  // bf16
// Two buffers, each two 128 x 128 bf16 tiles (each tile two 64-column halves in the TMA's 128-byte
// swizzle; Dgelu: h, then act over it, and dact, then dh over it; BiasGelu: h and act) and 512
// bytes beside them (Dgelu: the tile's column sums, 128 floats; BiasGelu: its bias, bf16).
constexpr int kTileBytes = kBm * kBn * 2;
constexpr int kSideBytes = kBn * 4;
constexpr int kSmemBytes =
    1024 + kStages * (kABytes + kBBytes) + 2 * (2 * kTileBytes + kSideBytes) + (2 * kStages + 6) * 8;
static_assert(kSmemBytes <= 227 * 1024);

#if defined(LAB_SM90A)
namespace tma = lab::tma;

// The two epilogues, each with the layout of its B:
//  - Dgelu (step 21): B = W (reduce x cols, the weight as it lies: N-major, wgmma's transposed B,
//    two 64-column boxes a tile, 8 KB apart); in = h, out = dh, act; db += the column sums of dh.
//  - BiasGelu (step 22): B = W^T, W (cols x reduce) as it lies (K-major, one 64 x 128 box); in = the
//    bias (cols), out = h (bias added, rounded once; null: not kept), act = gelu(h) at the rounded h.
struct Dgelu {
  static constexpr bool kTransB = true;
};
struct BiasGelu {
  static constexpr bool kTransB = false;
};

// amap: A (rows x reduce), coordinates (k, row, 0), boxes of 64 x 128; bmap as the epilogue says.
// in, out, act: rows x cols, row-major (BiasGelu's in: cols values); db: cols values, added to.
// Persistent: block b makes the tiles b, b + grid, b + 2 grid, ... (row-major over the tiles of
// C). Its n-th tile goes through buffer n % 2, that buffer's use n / 2, and every barrier's parity
// is that use's: the copy warp and the products wait for freed[b] (the buffer's tile two back has
// left through the TMA) before they write into it, the epilogue waits for made[b] (and, for Dgelu,
// side_in[b]: h has landed). No waiter can fall two phases behind a barrier, since each phase of one
// needs the waiter's own step on the phase before.
// The byte offset of element (r, c) of a 128 x 128 bf16 tile laid out as two boxes of 128 rows x 64
// columns in the TMA's 128-byte swizzle: 16-byte chunk c / 8 of a row stored at chunk (c / 8) ^ (r % 8).
__device__ __forceinline__ int tile_offset(int r, int c) {
  return (c / 64) * (kTileBytes / 2) + r * 128 + ((((c % 64) / 8) ^ (r % 8)) * 16) + (c % 8) * 2;
}

// The direct epilogue's tensors as plain rows (rows x cols, row-major): in = h (Dgelu; BiasGelu:
// unused), out = dh (Dgelu) or h (BiasGelu; null: not kept), act.
struct Rows {
  const __nv_bfloat16* in;
  __nv_bfloat16* out;
  __nv_bfloat16* act;
};

// The epilogues' arithmetic on 4 consecutive columns of a row (two bf16 pairs each way), the same in
// both forms. Dgelu: gelu_backward_act_in_flight_kernel's, from dact (rounded to bf16 by the
// products) and h: dh = dact gelu'(h) (fp32, for the column sums, and in bf16) and act = gelu(h).
struct Dgelu4 {
  uint2 act, dh;
  float4 sum;
};
__device__ __forceinline__ Dgelu4 dgelu4(uint2 dact, uint2 h) {
  const float2 d01 = bf16_pair(dact.x), d23 = bf16_pair(dact.y);
  const float2 x01 = bf16_pair(h.x), x23 = bf16_pair(h.y);
  const float e0 = gelu_erf(x01.x), e1 = gelu_erf(x01.y), e2 = gelu_erf(x23.x), e3 = gelu_erf(x23.y);
  const float4 dh = make_float4(d01.x * dgelu_of(x01.x, e0), d01.y * dgelu_of(x01.y, e1), d23.x * dgelu_of(x23.x, e2),
                                d23.y * dgelu_of(x23.y, e3));
  return {make_uint2(bf16_pack(gelu_of(x01.x, e0), gelu_of(x01.y, e1)), bf16_pack(gelu_of(x23.x, e2), gelu_of(x23.y, e3))),
          make_uint2(bf16_pack(dh.x, dh.y), bf16_pack(dh.z, dh.w)), dh};
}
// BiasGelu: gelu_kernel's, act = gelu(h) at the rounded h.
__device__ __forceinline__ uint2 gelu4(uint2 h) {
  const float2 x01 = bf16_pair(h.x), x23 = bf16_pair(h.y);
  return make_uint2(bf16_pack(gelu(x01.x), gelu(x01.y)), bf16_pack(gelu(x23.x), gelu(x23.y)));
}

template <class Epi, int EpiWarps, bool Direct>
__global__ void __launch_bounds__(threads_for(EpiWarps), 1)
    tile_product_kernel(const __grid_constant__ CUtensorMap amap, const __grid_constant__ CUtensorMap bmap,
                        const __grid_constant__ CUtensorMap inmap, const __grid_constant__ CUtensorMap outmap,
                        const __grid_constant__ CUtensorMap actmap, const __nv_bfloat16* __restrict__ bias,
                        float* __restrict__ db, int rows, int cols, int reduce, int keep_out, Rows io) {
  static_assert(EpiWarps == 7 || EpiWarps == 11, "other_regs() knows the registers of 7 or 11 epilogue warps");
  constexpr bool kDgelu = std::is_same_v<Epi, Dgelu>;
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const a_s = smem_raw + ((1024 - tma::smem_address(smem_raw) % 1024) % 1024);
  std::uint8_t* const b_s = a_s + kStages * kABytes;
  std::uint8_t* const tiles_s = b_s + kStages * kBBytes;  // buffer b: tiles 2 b and 2 b + 1
  std::uint8_t* const side_s = tiles_s + 4 * kTileBytes;  // buffer b: kSideBytes at b kSideBytes
  std::uint64_t* const full = reinterpret_cast<std::uint64_t*>(side_s + 2 * kSideBytes);
  std::uint64_t* const empty = full + kStages;
  std::uint64_t* const made = empty + kStages;  // made[b]: the products' tile is in buffer b
  std::uint64_t* const freed = made + 2;        // freed[b]: buffer b's outputs are out (read by the TMA)
  std::uint64_t* const side_in = freed + 2;     // side_in[b]: h (Dgelu) or the bias (BiasGelu) has landed
  const int tiles_n = (cols + kBn - 1) / kBn, tiles = tiles_n * ((rows + kBm - 1) / kBm);
  const int ktiles = (reduce + kBk - 1) / kBk;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) tma::init(full + st, 1), tma::init(empty + st, 4);  // the products' warps
    // freed: the elected thread once the TMA has read the buffer; directly, each epilogue warp once
    // it has read its rows of it.
    for (int b = 0; b < 2; ++b) tma::init(made + b, 4), tma::init(freed + b, Direct ? EpiWarps : 1), tma::init(side_in + b, 1);
    tma::fence_init();
  }
  if constexpr (kDgelu) {
    if (threadIdx.x < 2 * kBn) reinterpret_cast<float*>(side_s)[threadIdx.x] = 0.f;  // the column sums
  }
  __syncthreads();
  // A tile's buffer is the parity of its count in the block, n; its use of that buffer is n / 2.

  // The registers by role (setmaxnreg wants each role one branch of an if/else): the products'
  // warpgroup holds 128 accumulators a thread and takes kMmaRegs; the other two give theirs up.
  if (warp >= 4 && warp < 8) {  // the products: one warpgroup
    wgmma::setmaxnreg_inc<kMmaRegs>();
    const int g = lane / 4, t = lane % 4, w = warp - 4;
    int it = 0, n = 0;
    for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x), ++n) {
      float acc[2][64] = {};
      // The reduction, 64 at a time: a stage is 4 steps of 16, each two m64n128k16 (the tile's
      // upper and lower 64 rows; A K-major: the k-th 16 columns 32 bytes on; B N-major: the k-th 16
      // rows 2048 bytes on, its two 64-column regions 8 KB apart; or B K-major as A). A stage's
      // group is left in flight while the next is issued; the stage before is released once its
      // group is done.
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int st = it % kStages;
        tma::wait(full + st, unsigned(it / kStages) & 1);
        const std::uint8_t* a = a_s + st * kABytes;
        const std::uint8_t* bb = b_s + st * kBBytes;
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kBk / 16; ++kk) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const std::uint64_t ad = wgmma::descriptor(a + half * 64 * 128) + 2 * kk;
            if constexpr (Epi::kTransB)
              wgmma::mma_ss_n128<0, 1>(acc[half], ad, wgmma::descriptor_mn(bb + kk * 2048, kBBytes / 2),
                                       kt > 0 || kk > 0);
            else
              wgmma::mma_ss_n128<0, 0>(acc[half], ad, wgmma::descriptor(bb) + 2 * kk, kt > 0 || kk > 0);
          }
        }
        wgmma::commit();
        wgmma::wait<1>();
        if (kt > 0 && lane == 0) tma::arrive(empty + (it - 1) % kStages);
      }
      wgmma::wait<0>();
      if (lane == 0) tma::arrive(empty + (it - 1) % kStages);

      // Into the buffer as bf16, in the tiles' swizzle (a warp's 4-byte stores on 32 distinct
      // banks): dact rounded as cuBLAS wrote it (Dgelu), or h = the sum plus the bias, rounded once,
      // as cuBLASLt's bias epilogue (BiasGelu).
      const int b = n % 2;
      tma::wait(freed + b, (unsigned(n / 2) & 1) ^ 1);
      std::uint8_t* const dst = tiles_s + (2 * b + (kDgelu ? 1 : 0)) * kTileBytes;
      if constexpr (!kDgelu) tma::wait(side_in + b, unsigned(n / 2) & 1);
      const __nv_bfloat16* const bias_s = reinterpret_cast<const __nv_bfloat16*>(side_s + b * kSideBytes);
#pragma unroll
      for (int j = 0; j < kBn / 8; ++j) {
        const int col = 8 * j + 2 * t;
        float2 bv = make_float2(0.f, 0.f);
        if constexpr (!kDgelu) bv = bf16_pair(*reinterpret_cast<const unsigned*>(bias_s + col));
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // rows g, g + 8 of each 64-row half
          const int r = 64 * (q / 2) + 16 * w + g + 8 * (q % 2);
          const float* d = acc[q / 2] + 4 * j + 2 * (q % 2);
          *reinterpret_cast<unsigned*>(dst + tile_offset(r, col)) = bf16_pack(d[0] + bv.x, d[1] + bv.y);
        }
      }
      // BiasGelu's h leaves through the TMA as these threads wrote it: their writes ordered before
      // the async proxy's reads here, since a proxy fence orders only its own thread's accesses.
      tma::fence_proxy_async();
      __syncwarp();
      if (lane == 0) tma::arrive(made + b);
    }
  } else {
    wgmma::setmaxnreg_dec<other_regs(EpiWarps)>();
    if (warp == 0) {  // the copies, from one thread
      if (lane == 0) {
        tma::prefetch_map(&amap), tma::prefetch_map(&bmap);
        int it = 0;  // the block's slices, counted over its tiles: the ring's stage and phase
        int n = 0;
        for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x), ++n) {
          const int m0 = tile / tiles_n * kBm, n0 = tile % tiles_n * kBn;
          for (int kt = 0; kt < ktiles; ++kt, ++it) {
            const int st = it % kStages;
            tma::wait(empty + st, (unsigned(it / kStages) & 1) ^ 1);
            tma::arrive_expect_bytes(full + st, kABytes + kBBytes);
            tma::load_tile(a_s + st * kABytes, &amap, kt * kBk, m0, 0, full + st);
            if constexpr (Epi::kTransB) {
              tma::load_tile(b_s + st * kBBytes, &bmap, n0, kt * kBk, 0, full + st);
              tma::load_tile(b_s + st * kBBytes + kBBytes / 2, &bmap, n0 + 64, kt * kBk, 0, full + st);
            } else {
              tma::load_tile(b_s + st * kBBytes, &bmap, kt * kBk, n0, 0, full + st);
            }
          }
          // The tile's h (Dgelu) or bias (BiasGelu), once the epilogue is done with the buffer's
          // tile before (two tiles back), issued after this tile's slices so that it does not hold
          // them up.
          const int b = n % 2;
          if constexpr (Direct && kDgelu) continue;  // the epilogue warps read h themselves
          tma::wait(freed + b, (unsigned(n / 2) & 1) ^ 1);
          if constexpr (kDgelu) {
            std::uint8_t* const h_s = tiles_s + 2 * b * kTileBytes;
            tma::arrive_expect_bytes(side_in + b, kTileBytes);
            tma::load_tile(h_s, &inmap, n0, m0, 0, side_in + b);
            tma::load_tile(h_s + kTileBytes / 2, &inmap, n0 + 64, m0, 0, side_in + b);
          } else {
            // cols % 8 == 0: a multiple of 16 bytes, as the bulk copy wants
            const unsigned bytes = unsigned(cols - n0 < kBn ? cols - n0 : kBn) * 2;
            tma::arrive_expect_bytes(side_in + b, bytes);
            tma::load_bulk(side_s + b * kSideBytes, bias + n0, bytes, side_in + b);
          }
        }
      }
    } else if constexpr (Direct) {
      // The epilogue, directly: EpiWarps warps (1 to 3, and 8 on), each on every EpiWarps-th row of
      // the tile (kRows at most), a lane on 4 columns; the tile's products from the buffer, h (Dgelu)
      // from memory into registers a tile ahead, the outputs to memory from registers.
      constexpr int kRows = (kBm + EpiWarps - 1) / EpiWarps;
      const int e = warp < 4 ? warp - 1 : warp - 5, et = 32 * e + lane, c = 4 * lane;
      uint2 hv[kRows];  // Dgelu: the tile's h, this lane's 4 columns of each of the warp's rows
      auto load_h = [&](int tile) {
        const int m0 = tile / tiles_n * kBm, n0 = tile % tiles_n * kBn;
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          const int r = e + i * EpiWarps;
          if (r < kBm && m0 + r < rows && n0 + c < cols)
            hv[i] = __ldg(reinterpret_cast<const uint2*>(io.in + std::size_t(m0 + r) * cols + n0 + c));
        }
      };
      if constexpr (kDgelu) {
        if (int(blockIdx.x) < tiles) load_h(int(blockIdx.x));
      }
      int n = 0;
      for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x), ++n) {
        const int m0 = tile / tiles_n * kBm, n0 = tile % tiles_n * kBn;
        const int b = n % 2;
        const std::uint8_t* const src = tiles_s + (2 * b + (kDgelu ? 1 : 0)) * kTileBytes;  // dact, or h
        float* const sums = reinterpret_cast<float*>(side_s + b * kSideBytes);
        tma::wait(made + b, unsigned(n / 2) & 1);
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          const int r = e + i * EpiWarps;
          if (r < kBm && m0 + r < rows && n0 + c < cols) {
            const uint2 v = *reinterpret_cast<const uint2*>(src + tile_offset(r, c));
            const std::size_t at = std::size_t(m0 + r) * cols + n0 + c;
            if constexpr (kDgelu) {
              const Dgelu4 o = dgelu4(v, hv[i]);
              *reinterpret_cast<uint2*>(io.act + at) = o.act;
              *reinterpret_cast<uint2*>(io.out + at) = o.dh;
              sum.x += o.sum.x, sum.y += o.sum.y, sum.z += o.sum.z, sum.w += o.sum.w;
            } else {
              if (keep_out) *reinterpret_cast<uint2*>(io.out + at) = v;  // h, where it is kept
              *reinterpret_cast<uint2*>(io.act + at) = gelu4(v);
            }
          }
        }
        // This warp's rows of the buffer are read: the products may fill it again (two tiles on).
        __syncwarp();
        if (lane == 0) tma::arrive(freed + b);
        if constexpr (kDgelu) {
          if (tile + int(gridDim.x) < tiles) load_h(tile + int(gridDim.x));  // in flight while the next tile is made
          // The column sums of the fp32 dh, as the other epilogue's: the warps' in shared memory, one
          // atomic a column a tile into db; the buffer's sums next added to two tiles on, after every
          // epilogue warp has passed the next tile's barrier, so after this read.
          atomicAdd(sums + c, sum.x), atomicAdd(sums + c + 1, sum.y), atomicAdd(sums + c + 2, sum.z),
              atomicAdd(sums + c + 3, sum.w);
          asm volatile("bar.sync 1, %0;\n" ::"n"(32 * EpiWarps) : "memory");
          if (et < kBn) {
            const float v = sums[et];
            sums[et] = 0.f;
            if (n0 + et < cols) atomicAdd(db + n0 + et, v);
          }
        }
      }
    } else {
      // The epilogue: EpiWarps warps (1 to 3, and 8 on), each on every EpiWarps-th row of the tile, a
      // lane on 4 columns.
      const int e = warp < 4 ? warp - 1 : warp - 5, et = 32 * e + lane;
      const bool elected = et == 0;  // issues the stores
      int n = 0;
      for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x), ++n) {
        const int m0 = tile / tiles_n * kBm, n0 = tile % tiles_n * kBn;
        const int b = n % 2;
        std::uint8_t* const t0 = tiles_s + 2 * b * kTileBytes;  // Dgelu: h, then act; BiasGelu: h
        std::uint8_t* const t1 = t0 + kTileBytes;               // Dgelu: dact, then dh; BiasGelu: act
        float* const sums = reinterpret_cast<float*>(side_s + b * kSideBytes);
        tma::wait(made + b, unsigned(n / 2) & 1);
        if constexpr (kDgelu) tma::wait(side_in + b, unsigned(n / 2) & 1);
        const int c = 4 * lane;
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 2
        for (int r = e; r < kBm; r += EpiWarps) {
          const int at = tile_offset(r, c);  // 8 bytes, within one 16-byte chunk
          if constexpr (kDgelu) {
            // dact (the products' bf16) and h in; act over h, dh over dact.
            const Dgelu4 o = dgelu4(*reinterpret_cast<const uint2*>(t1 + at), *reinterpret_cast<const uint2*>(t0 + at));
            *reinterpret_cast<uint2*>(t0 + at) = o.act;
            *reinterpret_cast<uint2*>(t1 + at) = o.dh;
            if (m0 + r < rows) sum.x += o.sum.x, sum.y += o.sum.y, sum.z += o.sum.z, sum.w += o.sum.w;
          } else {
            *reinterpret_cast<uint2*>(t1 + at) = gelu4(*reinterpret_cast<const uint2*>(t0 + at));  // act from h
          }
        }
        if constexpr (kDgelu) {
          // The column sums of the fp32 dh: a lane's over its rows, the warps' in shared memory.
          atomicAdd(sums + c, sum.x), atomicAdd(sums + c + 1, sum.y), atomicAdd(sums + c + 2, sum.z),
              atomicAdd(sums + c + 3, sum.w);
        }
        tma::fence_proxy_async();  // this thread's writes, before the TMA reads them
        asm volatile("bar.sync 1, %0;\n" ::"n"(32 * EpiWarps) : "memory");
        if constexpr (kDgelu) {
          // One atomic a column a tile into db. The buffer's sums are next added to two tiles on,
          // after every epilogue warp has passed the next tile's barrier, so after this read.
          if (et < kBn) {
            const float v = sums[et];
            sums[et] = 0.f;
            if (n0 + et < cols) atomicAdd(db + n0 + et, v);
          }
        }
        if (elected) {
          if constexpr (kDgelu) {
            tma::store_tile(&actmap, t0, n0, m0, 0), tma::store_tile(&actmap, t0 + kTileBytes / 2, n0 + 64, m0, 0);
            tma::store_tile(&outmap, t1, n0, m0, 0), tma::store_tile(&outmap, t1 + kTileBytes / 2, n0 + 64, m0, 0);
          } else {
            if (keep_out)
              tma::store_tile(&outmap, t0, n0, m0, 0), tma::store_tile(&outmap, t0 + kTileBytes / 2, n0 + 64, m0, 0);
            tma::store_tile(&actmap, t1, n0, m0, 0), tma::store_tile(&actmap, t1 + kTileBytes / 2, n0 + 64, m0, 0);
          }
          tma::bulk_commit();
          tma::bulk_wait_read<0>();
          tma::arrive(freed + b);
        }
      }
      if (elected) tma::bulk_wait<0>();  // the last stores done before the block's shared memory goes
    }
  }
}
#endif

#if defined(LAB_SM90A)
// The map of a rows x cols bf16 matrix as it lies, in boxes of 64 columns (128 bytes, the swizzle's
// width) x kBm rows: an output (or Dgelu's h) in the epilogue's boxes, and the product's A operand
// (dY, or X: rows x reduce) in the loads' boxes, kBk columns, which are the same.
static_assert(kBk == 64, "the A operand's boxes are the epilogue's: 64 columns");
inline CUtensorMap tile_map(const void* p, int rows, int cols) {
  return lab::tma::bf16_map_swizzle128(p, {std::uint64_t(cols), std::uint64_t(rows), 1},
                                       {std::uint64_t(cols) * 2, std::uint64_t(cols) * 2 * std::uint64_t(rows)},
                                       {64, kBm, 1});
}
#endif

// The persistent grid: a block an SM (the current device's count, read once, before any capture).
inline int sm_count() {
  static const int count = [] {
    int device = 0, n = 0;
    LAB_CHECK(cudaGetDevice(&device));
    LAB_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return count;
}

// The grid: a block an SM, at most one a tile; blocks > 0 asks for that many instead (the kernel
// tests pass 2 or 3, so that each block makes several tiles: the buffers reused, every barrier's
// parity turned).
inline unsigned grid_for(int rows, int cols, int blocks) {
  const int tiles = ((cols + kBn - 1) / kBn) * ((rows + kBm - 1) / kBm);
  return unsigned(std::min(blocks > 0 ? blocks : sm_count(), tiles));
}

// A form's shared-memory attribute, set once (and the SM count read), before any capture: each
// launch function sets its own form's, and the steps' Products classes, as they are made, the
// forms they launch (the functions' defaults): step 21 prepare_backward(), step 22 that and
// prepare_forward(). So a step compiles the forms it runs and no other, and the kernel tests all
// four (each instantiation is one more kernel for ptxas: all eight in every step made a step's
// build minutes longer, session 85).
template <class Epi, int EpiWarps, bool Direct>
inline void prepare_form() {
#if defined(LAB_SM90A)
  static const bool done = [] {
    LAB_CHECK(cudaFuncSetAttribute(tile_product_kernel<Epi, EpiWarps, Direct>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    (void)sm_count();
    return true;
  }();
  (void)done;
#endif
}
inline void prepare_backward() {  // dx_dgelu's default form
#if defined(LAB_SM90A)
  prepare_form<Dgelu, kEpiWarps, kDirect>();
#endif
}
inline void prepare_forward() {  // bias_gelu's default form
#if defined(LAB_SM90A)
  prepare_form<BiasGelu, kBiasGeluEpiWarps, kBiasGeluDirect>();
#endif
}

// Whether dx_dgelu runs here: a build for sm_90a, the TMA's strides (2 reduce and 2 cols bytes
// multiples of 16), 4-byte pairs of h, dh and act, every tensor 16-byte aligned.
inline bool dx_dgelu_fits(const void* dY, const void* W, const void* h, const void* dh, const void* act, int rows,
                          int reduce, int cols) {
#if defined(LAB_SM90A)
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return rows > 0 && reduce > 0 && cols > 0 && reduce % 8 == 0 && cols % 8 == 0 && aligned(dY) && aligned(W) &&
         aligned(h) && aligned(dh) && aligned(act);
#else
  (void)dY, (void)W, (void)h, (void)dh, (void)act, (void)rows, (void)reduce, (void)cols;
  return false;
#endif
}

// dh and act (rows x cols, bf16) and db (cols, added to) from dY (rows x reduce), W (reduce x cols)
// and h (rows x cols), all bf16, where dx_dgelu_fits() says so (the caller runs the two kernels
// otherwise); blocks as grid_for() says.
template <int EpiWarps = kEpiWarps, bool Direct = kDirect>
inline void dx_dgelu(const __nv_bfloat16* dY, const __nv_bfloat16* W, const __nv_bfloat16* h, __nv_bfloat16* dh,
                     __nv_bfloat16* act, float* db, int rows, int reduce, int cols, cudaStream_t stream,
                     int blocks = 0) {
#if defined(LAB_SM90A)
  prepare_form<Dgelu, EpiWarps, Direct>();
  const CUtensorMap amap = tile_map(dY, rows, reduce);
  const CUtensorMap bmap = lab::tma::bf16_map_swizzle128(
      W, {std::uint64_t(cols), std::uint64_t(reduce), 1},
      {std::uint64_t(cols) * 2, std::uint64_t(cols) * 2 * std::uint64_t(reduce)}, {64, kBk, 1});
  const CUtensorMap hmap = tile_map(h, rows, cols), dhmap = tile_map(dh, rows, cols);
  const CUtensorMap actmap = tile_map(act, rows, cols);
  const unsigned grid = grid_for(rows, cols, blocks);
  tile_product_kernel<Dgelu, EpiWarps, Direct><<<grid, threads_for(EpiWarps), kSmemBytes, stream>>>(
      amap, bmap, hmap, dhmap, actmap, nullptr, db, rows, cols, reduce, 1, Rows{h, dh, act});
  LAB_CHECK(cudaGetLastError());
#else
  (void)dY, (void)W, (void)h, (void)dh, (void)act, (void)db, (void)rows, (void)reduce, (void)cols, (void)stream,
      (void)blocks;
  throw lab::Error("dx_dgelu needs a build for sm_90a (dx_dgelu_fits() says where it runs)");
#endif
}

// Whether bias_gelu runs here: dx_dgelu_fits()'s conditions over X, W, the bias, h (null: not kept)
// and act.
inline bool bias_gelu_fits(const void* X, const void* W, const void* bias, const void* h, const void* act, int rows,
                           int reduce, int cols) {
  return dx_dgelu_fits(X, W, bias, h ? h : act, act, rows, reduce, cols);
}

// The MLP's first product with its bias and GELU (step 22): h = X W^T + bias (X: rows x reduce, W:
// cols x reduce as the layer's weight lies, bias: cols; all bf16), rounded once to bf16, written
// where h is not null, and act = gelu(h) at the rounded value, where bias_gelu_fits() says so (the
// caller runs cuBLASLt's bias product and gelu_kernel otherwise); blocks as grid_for() says.
template <int EpiWarps = kBiasGeluEpiWarps, bool Direct = kBiasGeluDirect>
inline void bias_gelu(const __nv_bfloat16* X, const __nv_bfloat16* W, const __nv_bfloat16* bias, __nv_bfloat16* h,
                      __nv_bfloat16* act, int rows, int reduce, int cols, cudaStream_t stream, int blocks = 0) {
#if defined(LAB_SM90A)
  prepare_form<BiasGelu, EpiWarps, Direct>();
  const CUtensorMap amap = tile_map(X, rows, reduce);
  const CUtensorMap bmap = lab::tma::bf16_map_swizzle128(
      W, {std::uint64_t(reduce), std::uint64_t(cols), 1},
      {std::uint64_t(reduce) * 2, std::uint64_t(reduce) * 2 * std::uint64_t(cols)}, {kBk, kBn, 1});
  const CUtensorMap actmap = tile_map(act, rows, cols), hmap = h ? tile_map(h, rows, cols) : actmap;
  const unsigned grid = grid_for(rows, cols, blocks);
  tile_product_kernel<BiasGelu, EpiWarps, Direct><<<grid, threads_for(EpiWarps), kSmemBytes, stream>>>(
      amap, bmap, actmap, hmap, actmap, bias, nullptr, rows, cols, reduce, h != nullptr, Rows{nullptr, h, act});
  LAB_CHECK(cudaGetLastError());
#else
  (void)X, (void)W, (void)bias, (void)h, (void)act, (void)rows, (void)reduce, (void)cols, (void)stream, (void)blocks;
  throw lab::Error("bias_gelu needs a build for sm_90a (bias_gelu_fits() says where it runs)");
#endif
}

}  // namespace dgelu_product
}  // namespace
