// GELU's backward in the epilogue of the product that makes its input (optimized_gpt2_step_fused_bf16_gelu_in_product.cu
// tells the lesson): the MLP's second product's input gradient dact = dY W, written by cuBLAS in
// bf16 until step 20 and read back by gelu_backward_act_in_flight, is here made by a product of the
// lab's own whose epilogue does that kernel's work on the accumulators while they are in registers:
// dact rounded to bf16 (the value cuBLAS wrote), dh = dact gelu'(h) and act = gelu(h) written in
// bf16, and the column sums of the fp32 dh added into db. dact never goes to memory.
//
// The product (sm_90a): C (rows x cols) = A (rows x reduce) B (reduce x cols), A = dY and B = W as
// they lie (row-major, bf16; W is the layer's weight, out x in, so reduce = d and cols = 4 d).
// A block makes a 128 x 128 tile of C: two consumer warpgroups of 64 rows each, m64n128k16 wgmma
// from shared memory (A K-major, B N-major: wgmma's transposed B), and a producer warp that copies
// 64-wide slices of the reduction (A 128 x 64, B 64 x 128, 32 KB a stage) through the TMA into a
// ring of kStages stages, an mbarrier for full and one for empty each. 96 KB of shared memory and
// 288 threads, so that two blocks share an SM: one's epilogue (the erf, the exp and 12 bytes of
// memory an element) runs while the other's products hold the tensor cores.
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
constexpr int kConsumerThreads = 256, kThreads = kConsumerThreads + 32;
constexpr int kABytes = kBm * kBk * 2, kBBytes = kBk * kBn * 2;  // bf16
// Each consumer's two output tiles (128 x 128 bf16, each two 64-column halves in the TMA's 128-byte
// swizzle): Dgelu's h (loaded during the products, then act over it) and dh; BiasGelu's h and act.
constexpr int kTileBytes = kBm * kBn * 2;
constexpr int kSmemBytes = 1024 + kStages * (kABytes + kBBytes) + 2 * 2 * kTileBytes + (2 * kStages + 4) * 8;
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
// C), its two consumers taking turns: consumer 0 the block's first, third, ... tile, consumer 1 the
// second, fourth, ... The producer fills one ring of stages with the block's tiles' slices in that
// order, and the consumers take turns at it (turn[]: each waits until the other has waited for
// its last stage, as the ring's parity waits need: a barrier's phase must not be more than one
// behind the waiter's): while one runs its epilogue (the erf, the exp and the memory), the other
// holds the tensor cores.
// The byte offset of element (r, c) of a 128 x 128 bf16 tile laid out as two boxes of 128 rows x 64
// columns in the TMA's 128-byte swizzle: 16-byte chunk c / 8 of a row stored at chunk (c / 8) ^ (r % 8).
__device__ __forceinline__ int tile_offset(int r, int c) {
  return (c / 64) * (kTileBytes / 2) + r * 128 + ((((c % 64) / 8) ^ (r % 8)) * 16) + (c % 8) * 2;
}

template <class Epi>
__global__ void __launch_bounds__(kThreads, 1)
    tile_product_kernel(const __grid_constant__ CUtensorMap amap, const __grid_constant__ CUtensorMap bmap,
                        const __grid_constant__ CUtensorMap inmap, const __grid_constant__ CUtensorMap outmap,
                        const __grid_constant__ CUtensorMap actmap, const __nv_bfloat16* __restrict__ bias,
                        float* __restrict__ db, int rows, int cols, int reduce, int keep_out) {
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const a_s = smem_raw + ((1024 - tma::smem_address(smem_raw) % 1024) % 1024);
  std::uint8_t* const b_s = a_s + kStages * kABytes;
  std::uint8_t* const tiles_s = b_s + kStages * kBBytes;
  std::uint64_t* const full = reinterpret_cast<std::uint64_t*>(tiles_s + 2 * 2 * kTileBytes);
  std::uint64_t* const empty = full + kStages;
  std::uint64_t* const turn = empty + kStages;  // turn[c]: consumer c may start its next tile's products
  std::uint64_t* const h_in = turn + 2;         // h_in[c]: Dgelu's h tile of consumer c has landed
  const int tiles_n = (cols + kBn - 1) / kBn, tiles = tiles_n * ((rows + kBm - 1) / kBm);
  const int ktiles = (reduce + kBk - 1) / kBk;
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) tma::init(full + st, 1), tma::init(empty + st, 4);  // a consumer's warps
    tma::init(turn, 4), tma::init(turn + 1, 4), tma::init(h_in, 1), tma::init(h_in + 1, 1);
    tma::fence_init();
  }
  __syncthreads();

  if (threadIdx.x >= kConsumerThreads) {  // the producer warp: one thread issues the copies
    if (threadIdx.x == kConsumerThreads) {
      tma::prefetch_map(&amap), tma::prefetch_map(&bmap);
      int it = 0;  // the block's slices, counted over its tiles: the ring's stage and phase
      for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x)) {
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
      }
    }
    return;
  }

  const int consumer = int(threadIdx.x) / 128, warp = int(threadIdx.x / 32) % 4, lane = int(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  const bool elected = threadIdx.x % 128 == 0;  // issues this consumer's tile copies
  std::uint8_t* const t0 = tiles_s + consumer * 2 * kTileBytes;  // Dgelu: h, then act; BiasGelu: h
  std::uint8_t* const t1 = t0 + kTileBytes;                       // Dgelu: dh; BiasGelu: act
  int i = consumer;  // the block's tile count: this consumer's tiles are every second
  for (int tile = int(blockIdx.x) + consumer * int(gridDim.x); tile < tiles; tile += 2 * int(gridDim.x), i += 2) {
    const int m0 = tile / tiles_n * kBm, n0 = tile % tiles_n * kBn;
    const int it0 = i * ktiles;
    if (elected) {
      // The tile before's stores have read t0 and t1; Dgelu's h for this tile comes in over t0
      // while the products run.
      tma::bulk_wait_read<0>();
      if constexpr (std::is_same_v<Epi, Dgelu>) {
        tma::arrive_expect_bytes(h_in + consumer, kTileBytes);
        tma::load_tile(t0, &inmap, n0, m0, 0, h_in + consumer);
        tma::load_tile(t0 + kTileBytes / 2, &inmap, n0 + 64, m0, 0, h_in + consumer);
      }
    }
    float acc[2][64] = {};
    if (i > 0) tma::wait(turn + consumer, unsigned((i - 1) / 2) & 1);  // the other's tile i - 1 has its stages
    // The reduction, 64 at a time: a stage is 4 steps of 16, each two m64n128k16 (the tile's upper
    // and lower 64 rows; A K-major: the k-th 16 columns 32 bytes on; B N-major: the k-th 16 rows
    // 2048 bytes on, its two 64-column regions 8 KB apart; or B K-major as A). A stage's group is
    // left in flight while the next is issued; the stage before is released once its group is done.
    for (int kt = 0; kt < ktiles; ++kt) {
      const int it = it0 + kt, st = it % kStages;
      tma::wait(full + st, unsigned(it / kStages) & 1);
      const std::uint8_t* a = a_s + st * kABytes;
      const std::uint8_t* b = b_s + st * kBBytes;
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kBk / 16; ++kk) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const std::uint64_t ad = wgmma::descriptor(a + half * 64 * 128) + 2 * kk;
          if constexpr (Epi::kTransB)
            wgmma::mma_ss_n128<0, 1>(acc[half], ad, wgmma::descriptor_mn(b + kk * 2048, kBBytes / 2), kt > 0 || kk > 0);
          else
            wgmma::mma_ss_n128<0, 0>(acc[half], ad, wgmma::descriptor(b) + 2 * kk, kt > 0 || kk > 0);
        }
      }
      wgmma::commit();
      wgmma::wait<1>();
      if (kt > 0 && lane == 0) tma::arrive(empty + (it - 1) % kStages);
    }
    if (lane == 0) tma::arrive(turn + (1 - consumer));
    wgmma::wait<0>();
    if (lane == 0) tma::arrive(empty + (it0 + ktiles - 1) % kStages);

    // The epilogue. Stored straight from the accumulators' layout (a lane's pairs 8 rows apart, a
    // quad's 16 bytes of a row), the tile went out as 16-byte pieces of 8 rows an instruction, and
    // the product took 3.5x cuBLAS's time; with h read the same way, the epilogue waited on it. So
    // the tiles go through shared memory in the TMA's layout (a warp's 4-byte accesses on 32
    // distinct banks), h comes in by the TMA during the products, and the TMA stores the outputs
    // while this consumer's next products run.
    if constexpr (std::is_same_v<Epi, Dgelu>) {
      tma::wait(h_in + consumer, unsigned(i / 2) & 1);
    } else {
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");  // the elected thread's wait_read
    }
    // First the fragments go into shared memory as bf16 (dact rounded as cuBLAS wrote it; h = the
    // sum plus the bias, rounded once, as cuBLASLt's bias epilogue), with few registers free while
    // the accumulators live; then the arithmetic, each warp on whole rows (a lane 4 columns, four
    // rows at once), with the accumulators' registers free for it.
    std::uint8_t* const sums = std::is_same_v<Epi, Dgelu> ? t1 : t0;  // dact goes where dh will
#pragma unroll
    for (int j = 0; j < kBn / 8; ++j) {
      const int col = 8 * j + 2 * t;
      float2 b = make_float2(0.f, 0.f);
      if constexpr (std::is_same_v<Epi, BiasGelu>) {
        if (n0 + col < cols) b = bf16_pair(*reinterpret_cast<const unsigned*>(bias + n0 + col));
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // rows g, g + 8 of each 64-row half
        const int r = 64 * (q / 2) + 16 * warp + g + 8 * (q % 2);
        const float* d = acc[q / 2] + 4 * j + 2 * (q % 2);
        *reinterpret_cast<unsigned*>(sums + tile_offset(r, col)) = bf16_pack(d[0] + b.x, d[1] + b.y);
      }
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
    const int c = 4 * lane;  // this lane's 4 columns of the tile
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int r = warp; r < kBm; r += 4) {
      const int at = tile_offset(r, c);  // 8 bytes, within one 16-byte chunk
      const uint2 v = *reinterpret_cast<const uint2*>(sums + at);
      if constexpr (std::is_same_v<Epi, Dgelu>) {
        // gelu_backward_act_in_flight_kernel's arithmetic: dact (rounded to bf16 above),
        // dh = dact gelu'(h), act = gelu(h).
        const float2 d01 = bf16_pair(v.x), d23 = bf16_pair(v.y);
        const uint2 hv = *reinterpret_cast<const uint2*>(t0 + at);
        const float2 x01 = bf16_pair(hv.x), x23 = bf16_pair(hv.y);
        const float e0 = gelu_erf(x01.x), e1 = gelu_erf(x01.y), e2 = gelu_erf(x23.x), e3 = gelu_erf(x23.y);
        const float4 dh = make_float4(d01.x * dgelu_of(x01.x, e0), d01.y * dgelu_of(x01.y, e1),
                                      d23.x * dgelu_of(x23.x, e2), d23.y * dgelu_of(x23.y, e3));
        *reinterpret_cast<uint2*>(t0 + at) = make_uint2(bf16_pack(gelu_of(x01.x, e0), gelu_of(x01.y, e1)),
                                                        bf16_pack(gelu_of(x23.x, e2), gelu_of(x23.y, e3)));
        *reinterpret_cast<uint2*>(t1 + at) = make_uint2(bf16_pack(dh.x, dh.y), bf16_pack(dh.z, dh.w));
        if (m0 + r < rows) sum.x += dh.x, sum.y += dh.y, sum.z += dh.z, sum.w += dh.w;
      } else {
        // gelu_kernel's arithmetic: act = gelu(h) at the rounded h.
        const float2 x01 = bf16_pair(v.x), x23 = bf16_pair(v.y);
        *reinterpret_cast<uint2*>(t1 + at) =
            make_uint2(bf16_pack(gelu(x01.x), gelu(x01.y)), bf16_pack(gelu(x23.x), gelu(x23.y)));
      }
    }
    if constexpr (std::is_same_v<Epi, Dgelu>) {
      // The column sums of the fp32 dh: a lane's over its warp's 32 rows, one atomic each into db.
      if (n0 + c < cols)
        atomicAdd(db + n0 + c, sum.x), atomicAdd(db + n0 + c + 1, sum.y), atomicAdd(db + n0 + c + 2, sum.z),
            atomicAdd(db + n0 + c + 3, sum.w);
    }
    tma::fence_proxy_async();  // this thread's writes, before the TMA reads them
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
    if (elected) {
      if constexpr (std::is_same_v<Epi, Dgelu>) {
        tma::store_tile(&actmap, t0, n0, m0, 0), tma::store_tile(&actmap, t0 + kTileBytes / 2, n0 + 64, m0, 0);
        tma::store_tile(&outmap, t1, n0, m0, 0), tma::store_tile(&outmap, t1 + kTileBytes / 2, n0 + 64, m0, 0);
      } else {
        if (keep_out)
          tma::store_tile(&outmap, t0, n0, m0, 0), tma::store_tile(&outmap, t0 + kTileBytes / 2, n0 + 64, m0, 0);
        tma::store_tile(&actmap, t1, n0, m0, 0), tma::store_tile(&actmap, t1 + kTileBytes / 2, n0 + 64, m0, 0);
      }
      tma::bulk_commit();
    }
  }
  if (elected) tma::bulk_wait<0>();  // the last stores done before the block's shared memory goes
}
#endif

#if defined(LAB_SM90A)
// The map of a rows x cols bf16 output (or Dgelu's h) in the epilogue's boxes: 64 columns x 128 rows.
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

// The kernels' shared-memory attribute, set once, before any capture (the step's Products class
// calls it as it is made); the launches call it too.
inline void prepare() {
#if defined(LAB_SM90A)
  static const bool done = [] {
    LAB_CHECK(cudaFuncSetAttribute(tile_product_kernel<Dgelu>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   kSmemBytes));
    LAB_CHECK(cudaFuncSetAttribute(tile_product_kernel<BiasGelu>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   kSmemBytes));
    (void)sm_count();
    return true;
  }();
  (void)done;
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
// otherwise).
inline void dx_dgelu(const __nv_bfloat16* dY, const __nv_bfloat16* W, const __nv_bfloat16* h, __nv_bfloat16* dh,
                     __nv_bfloat16* act, float* db, int rows, int reduce, int cols, cudaStream_t stream) {
#if defined(LAB_SM90A)
  prepare();
  const CUtensorMap amap = lab::tma::bf16_map_swizzle128(
      dY, {std::uint64_t(reduce), std::uint64_t(rows), 1},
      {std::uint64_t(reduce) * 2, std::uint64_t(reduce) * 2 * std::uint64_t(rows)}, {kBk, kBm, 1});
  const CUtensorMap bmap = lab::tma::bf16_map_swizzle128(
      W, {std::uint64_t(cols), std::uint64_t(reduce), 1},
      {std::uint64_t(cols) * 2, std::uint64_t(cols) * 2 * std::uint64_t(reduce)}, {64, kBk, 1});
  const CUtensorMap hmap = tile_map(h, rows, cols), dhmap = tile_map(dh, rows, cols), actmap = tile_map(act, rows, cols);
  const unsigned grid = unsigned(std::min(sm_count(), ((cols + kBn - 1) / kBn) * ((rows + kBm - 1) / kBm)));
  tile_product_kernel<Dgelu><<<grid, kThreads, kSmemBytes, stream>>>(amap, bmap, hmap, dhmap, actmap, nullptr, db,
                                                                      rows, cols, reduce, 1);
  LAB_CHECK(cudaGetLastError());
#else
  (void)dY, (void)W, (void)h, (void)dh, (void)act, (void)db, (void)rows, (void)reduce, (void)cols, (void)stream;
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
// caller runs cuBLASLt's bias product and gelu_kernel otherwise).
inline void bias_gelu(const __nv_bfloat16* X, const __nv_bfloat16* W, const __nv_bfloat16* bias, __nv_bfloat16* h,
                      __nv_bfloat16* act, int rows, int reduce, int cols, cudaStream_t stream) {
#if defined(LAB_SM90A)
  prepare();
  const CUtensorMap amap = lab::tma::bf16_map_swizzle128(
      X, {std::uint64_t(reduce), std::uint64_t(rows), 1},
      {std::uint64_t(reduce) * 2, std::uint64_t(reduce) * 2 * std::uint64_t(rows)}, {kBk, kBm, 1});
  const CUtensorMap bmap = lab::tma::bf16_map_swizzle128(
      W, {std::uint64_t(reduce), std::uint64_t(cols), 1},
      {std::uint64_t(reduce) * 2, std::uint64_t(reduce) * 2 * std::uint64_t(cols)}, {kBk, kBn, 1});
  const CUtensorMap actmap = tile_map(act, rows, cols), hmap = h ? tile_map(h, rows, cols) : actmap;
  const unsigned grid = unsigned(std::min(sm_count(), ((cols + kBn - 1) / kBn) * ((rows + kBm - 1) / kBm)));
  tile_product_kernel<BiasGelu><<<grid, kThreads, kSmemBytes, stream>>>(amap, bmap, actmap, hmap, actmap, bias,
                                                                         nullptr, rows, cols, reduce, h != nullptr);
  LAB_CHECK(cudaGetLastError());
#else
  (void)X, (void)W, (void)bias, (void)h, (void)act, (void)rows, (void)reduce, (void)cols, (void)stream;
  throw lab::Error("bias_gelu needs a build for sm_90a (bias_gelu_fits() says where it runs)");
#endif
}

}  // namespace dgelu_product
}  // namespace
