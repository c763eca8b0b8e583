// What this chapter's row-wise kernels share (LayerNorm, cross-entropy, the weighted sum's
// backward): a row held in registers by a group of threads, sums over that group, and the second
// stage of a column reduction.
//
// A row tile is kLanes threads x kItems chunks of V floats (V = 4: 16-byte loads; V = 1: rows
// whose length is not a multiple of 4). Lane l holds columns (l + k kLanes) V ... + V - 1 for
// k < kItems, so each load instruction of a warp reads 32 consecutive chunks: coalesced. kLanes
// = 32 is a warp per row (8 rows to a 256-thread block); kLanes > 32 is a block per row; kLanes
// < 32 packs 32 / kLanes short rows into a warp (a sub-warp group per row: consecutive rows are
// consecutive in memory, so a warp's loads stay coalesced, and no lane idles on a 64-float row
// the way 16 of a warp's 32 would). The tiles are listed smallest first, and a kernel is
// instantiated for each: the row lives in registers, so it is read from memory once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "lab/check.hpp"
#include "lab/device.hpp"
#include "lab/elementwise.cuh"

namespace rows {

// Threads of a block: 256 for warp and sub-warp tiles (256 / kLanes rows a block), kLanes for
// block-per-row tiles (exactly one row a block: their sums synchronize the whole block, so a block
// never holds a second row, nor a thread that has no row).
template <int kLanes>
__host__ __device__ constexpr int block_threads() { return kLanes <= 32 ? 256 : kLanes; }
template <int kLanes>
__host__ __device__ constexpr int rows_per_block() { return block_threads<kLanes>() / kLanes; }

// The lanes of this thread's row group within its warp, for kLanes <= 32: the shuffles of one
// group name only its own lanes, so a group whose row is past the end may leave (return) while
// the warp's other groups go on summing.
template <int kLanes>
__device__ __forceinline__ unsigned group_mask() {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0);
  if constexpr (kLanes == 32) {
    return 0xffffffffu;
  } else {
    return ((1u << kLanes) - 1u) << (threadIdx.x % 32 / kLanes * kLanes);
  }
}

// Sum (or max) over the kLanes threads that share a row; every one of them gets the result.
// A sub-warp group (kLanes < 32, a power of two) is kLanes consecutive lanes; xor offsets below
// kLanes stay inside it. scratch: 32 floats of shared memory, used only when the row spans warps
// (kLanes > 32); the row is then the whole block (block_threads), and every thread of it must
// call.
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <int kLanes, class Op>
__device__ __forceinline__ float group_reduce(float v, Op op, float* scratch) {
  static_assert(kLanes < 32 ? (kLanes >= 1 && (kLanes & (kLanes - 1)) == 0) : (kLanes % 32 == 0 && kLanes <= 1024));
  constexpr int kWidth = kLanes < 32 ? kLanes : 32;
  const unsigned mask = group_mask<kWidth>();
#pragma unroll
  for (int o = kWidth / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(mask, v, o));
  if constexpr (kLanes > 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // the previous call's readers are done with scratch
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < kLanes / 32; ++w) v = op(v, scratch[w]);  // same order in every thread
  }
  return v;
}
template <int kLanes>
__device__ __forceinline__ float group_sum(float v, float* scratch) { return group_reduce<kLanes>(v, Sum{}, scratch); }

// V consecutive values, held as floats: stored as floats (16-byte aligned when V = 4) or as bf16 or
// fp16 (8-byte aligned when V = 4, 16-byte when V = 8; widened on the load, rounded to nearest on
// the store).
template <int V>
struct Chunk {
  float v[V];
  __device__ __forceinline__ static Chunk load(const float* p) {
    Chunk c;
    if constexpr (V == 4) {
      const float4 t = *reinterpret_cast<const float4*>(p);
      c.v[0] = t.x, c.v[1] = t.y, c.v[2] = t.z, c.v[3] = t.w;
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) c.v[i] = p[i];
    }
    return c;
  }
  __device__ __forceinline__ void store(float* p) const {
    if constexpr (V == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) p[i] = v[i];
    }
  }
  // 16-bit storage (bf16, fp16): an 8-byte access for four values, a 16-byte one for eight.
  template <class T>
  __device__ __forceinline__ static Chunk load(const T* p) {
    static_assert(sizeof(T) == 2, "bf16 or fp16");
    Chunk c;
    if constexpr (V == 4) {
      const uint2 t = *reinterpret_cast<const uint2*>(p);
      const float2 a = lab::pair_to_f32<T>(t.x), b = lab::pair_to_f32<T>(t.y);
      c.v[0] = a.x, c.v[1] = a.y, c.v[2] = b.x, c.v[3] = b.y;
    } else if constexpr (V == 8) {
      const uint4 t = *reinterpret_cast<const uint4*>(p);
      const unsigned w[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 a = lab::pair_to_f32<T>(w[i]);
        c.v[2 * i] = a.x, c.v[2 * i + 1] = a.y;
      }
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) c.v[i] = lab::to_f32(p[i]);
    }
    return c;
  }
  template <class T>
  __device__ __forceinline__ void store(T* p) const {
    static_assert(sizeof(T) == 2, "bf16 or fp16");
    if constexpr (V == 4) {
      *reinterpret_cast<uint2*>(p) = make_uint2(lab::pair_from_f32<T>(v[0], v[1]), lab::pair_from_f32<T>(v[2], v[3]));
    } else if constexpr (V == 8) {
      *reinterpret_cast<uint4*>(p) = make_uint4(lab::pair_from_f32<T>(v[0], v[1]), lab::pair_from_f32<T>(v[2], v[3]),
                                                lab::pair_from_f32<T>(v[4], v[5]), lab::pair_from_f32<T>(v[6], v[7]));
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) p[i] = lab::from_f32<T>(v[i]);
    }
  }
};

// The tiles, smallest first: {lanes, items}. Capacity lanes * items * V floats. Below a warp's
// 128 floats (at V = 4) the rows are packed: 2 to 4 lanes a row, each with up to 4 chunks, so a
// 64-float row is 4 lanes x 4 float4s, 8 rows to a warp. Fewer lanes a row means fewer shuffle
// steps a sum and fewer instructions a row, which is what bounds short rows (the loads are few
// and already coalesced).
struct Tile {
  int lanes, items;
};
inline constexpr Tile kTiles[] = {{2, 1},  {4, 1},   {4, 2},    {4, 4},    {32, 1},   {32, 2},  {32, 4},
                                  {32, 8}, {128, 8}, {256, 8}, {512, 8}, {1024, 8}};
inline constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);

// How many of the first tiles to take so that the last is {lanes, items} (a variant that cannot
// use the largest tiles names the largest it can).
constexpr int tiles_through(int lanes, int items) {
  for (int i = 0; i < kTileCount; ++i)
    if (kTiles[i].lanes == lanes && kTiles[i].items == items) return i + 1;
  return 0;
}

// Calls f(std::integral_constant<int, lanes>, std::integral_constant<int, items>) with the smallest
// of the first kCount tiles of kList (smallest first) that holds `dim` floats at vector width V;
// returns false when none does. Only those tiles are instantiated.
template <const auto& kList, int V, int kCount = int(sizeof(kList) / sizeof(kList[0])), int I = 0, class F>
bool with_tile_of(int dim, F&& f) {
  if constexpr (I >= kCount) {
    return false;
  } else {
    constexpr Tile t = kList[I];
    if (dim <= t.lanes * t.items * V) {
      f(std::integral_constant<int, t.lanes>{}, std::integral_constant<int, t.items>{});
      return true;
    }
    return with_tile_of<kList, V, kCount, I + 1>(dim, std::forward<F>(f));
  }
}
// The same over this file's tiles (a variant declares rows that none holds N/A: rows::row_fits).
template <int V, int kCount = kTileCount, class F>
bool with_tile(int dim, F&& f) {
  return with_tile_of<kTiles, V, kCount>(dim, std::forward<F>(f));
}

// Floats the largest of the first kCount tiles holds at vector width V.
template <int V, int kCount = kTileCount>
constexpr int largest_tile() {
  return kTiles[kCount - 1].lanes * kTiles[kCount - 1].items * V;
}

// "" when a row of `dim` values fits one of the first kCount tiles (held as floats in registers,
// whatever the storage; four a load when dim is a multiple of 4, one otherwise), else the reason a
// row-in-registers variant gives.
template <int kCount = kTileCount>
std::string row_fits(long long dim) {
  const int cap = dim % 4 == 0 ? largest_tile<4, kCount>() : largest_tile<1, kCount>();
  if (dim <= cap) return "";
  return "a row of " + std::to_string(dim) + " values is longer than the largest register tile (" +
         std::to_string(cap) + (dim % 4 == 0 ? " values)" : " values when D is not a multiple of 4)");
}

// Blocks for a row-tiled kernel over `rows` rows, one tile per group of threads.
template <int kLanes>
unsigned blocks_for_rows(std::size_t rows) {
  return static_cast<unsigned>((rows + rows_per_block<kLanes>() - 1) / rows_per_block<kLanes>());
}

// The second stage of a column reduction: out[c] = sum over p < parts of partial[p * pitch + c]
// for c < cols, in a fixed order (deterministic), 32 columns a block, coalesced. The sum is fp32;
// a bf16 or fp16 out gets it rounded once. Out: float, __nv_bfloat16 or __half (rows.cu).
template <class Out>
void sum_partials(const float* partial, int parts, int cols, std::size_t pitch, Out* out, cudaStream_t s);

}  // namespace rows
