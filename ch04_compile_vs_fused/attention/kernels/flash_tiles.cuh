// The building blocks of the fused (flash) attention kernels in fp32: 64-row tiles in shared
// memory and the three small matrix products the forward and the backward are made of, computed
// by a block of 16 x 16 threads, thread (ty, tx) owning four consecutive rows (4 ty ..) of the
// result. Every product reads shared memory in 16-byte chunks: 16 multiply-adds per two loads
// (the register blocking that makes a SIMT matrix product compute-bound rather than load-bound).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "lab/launch.hpp"

namespace flash {

inline constexpr int kRows = 64;       // rows of every tile: 64 queries or 64 keys
inline constexpr int kThreads = 256;   // 16 x 16

// A kRows x Cols tile of floats in shared memory, row-major in 16-byte chunks. The chunk index is
// XORed with the row's group of four ((row / 4) mod 8): the products below read four rows 4 apart
// per 8 lanes, and without the swizzle all of them would sit in the same four banks.
template <int Cols>
struct Tile {
  static constexpr int kChunks = Cols / 4;
  static constexpr int kSwizzle = kChunks >= 8 ? 7 : kChunks - 1;
  float4 chunk[kRows * kChunks];
  __device__ __forceinline__ static int at(int row, int c) { return row * kChunks + (c ^ ((row >> 2) & kSwizzle)); }
  __device__ __forceinline__ float4 ld(int row, int c) const { return chunk[at(row, c)]; }
  __device__ __forceinline__ void st(int row, int c, float4 v) { chunk[at(row, c)] = v; }
  __device__ __forceinline__ float get(int row, int col) const {
    const float4 v = chunk[at(row, col / 4)];
    switch (col % 4) {
      case 0: return v.x;
      case 1: return v.y;
      case 2: return v.z;
      default: return v.w;
    }
  }
};

__device__ __forceinline__ float lane(const float4& v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }

// Loads rows [row0, row0 + kRows) of a row-major matrix with `cols` columns and `rows` rows into
// the tile, zeros beyond the last row, each element times `mul`. Coalesced 16-byte reads.
template <int Cols>
__device__ __forceinline__ void load_tile(Tile<Cols>& t, const float* __restrict__ g, int row0, int rows, float mul = 1.f) {
  constexpr int kChunks = Tile<Cols>::kChunks;
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < rows) {
      v = __ldg(reinterpret_cast<const float4*>(g + std::size_t(row0 + r) * Cols) + c);
      v.x *= mul, v.y *= mul, v.z *= mul, v.w *= mul;
    }
    t.st(r, c, v);
  }
}

// The columns of a D-wide result a thread owns: W = D / 16 of them. For D >= 64, W / 4 chunks
// tx, tx + 16, ...; for D = 32 two columns 2 tx, 2 tx + 1; for D = 16 one column tx.
template <int D>
struct Cols {
  static constexpr int W = D / 16;
  __device__ __forceinline__ static int col(int tx, int w) { return W >= 4 ? 4 * (tx + 16 * (w / 4)) + w % 4 : W * tx + w; }
  // Row `row` of B at this thread's columns.
  __device__ __forceinline__ static void load(const Tile<D>& b, int row, int tx, float (&out)[W]) {
    if constexpr (W >= 4) {
#pragma unroll
      for (int m = 0; m < W / 4; ++m) {
        const float4 v = b.ld(row, tx + 16 * m);
        out[4 * m] = v.x, out[4 * m + 1] = v.y, out[4 * m + 2] = v.z, out[4 * m + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int w = 0; w < W; ++w) out[w] = b.get(row, W * tx + w);
    }
  }
};

// acc[i][j] += sum_k A[4 ty + i][k] B[4 tx + j][k]: a 64 x 64 block of A B^T (S = Q K^T).
template <int D>
__device__ __forceinline__ void product_nt(const Tile<D>& a, const Tile<D>& b, int ty, int tx, float (&acc)[4][4]) {
#pragma unroll 4
  for (int c = 0; c < D / 4; ++c) {
    float4 x[4], y[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = a.ld(4 * ty + i, c), y[i] = b.ld(4 * tx + i, c);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        acc[i][j] += x[i].x * y[j].x + x[i].y * y[j].y + x[i].z * y[j].z + x[i].w * y[j].w;
  }
}

// acc[i][w] += sum_k A[4 ty + i][k] B[k][col(w)] over the 64 columns of A (O += P V).
template <int D>
__device__ __forceinline__ void product_nn(const Tile<kRows>& a, const Tile<D>& b, int ty, int tx,
                                           float (&acc)[4][D / 16]) {
  constexpr int W = D / 16;
#pragma unroll 2
  for (int c = 0; c < kRows / 4; ++c) {
    float4 x[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = a.ld(4 * ty + i, c);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      float y[W];
      Cols<D>::load(b, 4 * c + kk, tx, y);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int w = 0; w < W; ++w) acc[i][w] += lane(x[i], kk) * y[w];
    }
  }
}

// acc[i][w] += sum_k A[k][4 ty + i] B[k][col(w)] over the 64 rows of A (dQ += dS K with dS^T stored).
template <int D>
__device__ __forceinline__ void product_tn(const Tile<kRows>& a, const Tile<D>& b, int ty, int tx,
                                           float (&acc)[4][D / 16]) {
  constexpr int W = D / 16;
#pragma unroll 4
  for (int k = 0; k < kRows; ++k) {
    const float4 x = a.ld(k, ty);
    float y[W];
    Cols<D>::load(b, k, tx, y);
#pragma unroll
    for (int w = 0; w < W; ++w) {
      acc[0][w] += x.x * y[w];
      acc[1][w] += x.y * y[w];
      acc[2][w] += x.z * y[w];
      acc[3][w] += x.w * y[w];
    }
  }
}

// Calls f(std::integral_constant<int, D>{}, std::bool_constant<causal>{}) for the runtime values:
// d 16, 32, 64 or 128, and 256 where MaxD says the kernels take it (flash_bf16.cuh's); another d
// throws (the callers validate it first).
template <int MaxD = 128, class F>
void dispatch(int d, bool causal, F&& f) {
  auto with_d = [&](auto dc) {
    if (causal)
      f(dc, std::true_type{});
    else
      f(dc, std::false_type{});
  };
  switch (d) {
    case 16: with_d(std::integral_constant<int, 16>{}); return;
    case 32: with_d(std::integral_constant<int, 32>{}); return;
    case 64: with_d(std::integral_constant<int, 64>{}); return;
    case 128: with_d(std::integral_constant<int, 128>{}); return;
    case 256:
      if constexpr (MaxD >= 256) {
        with_d(std::integral_constant<int, 256>{});
        return;
      }
      break;
    default: break;
  }
  throw std::invalid_argument("flash: no kernel for head size " + std::to_string(d) + " (16, 32, 64, 128" +
                              (MaxD >= 256 ? ", 256)" : ")"));
}

inline constexpr float kLog2e = 1.4426950408889634f;

// delta[row] = sum_c dO[row][c] O[row][c]: the row sums every fused backward subtracts
// (rowsum(dP o P) = rowsum(dO o O)). One warp a row, grid-stride over the rows.
template <int kThreads = 256>
__global__ void __launch_bounds__(kThreads)
    row_dot_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                   std::size_t rows, int d) {
  const int lane = threadIdx.x % 32;
  const std::size_t warps = std::size_t(gridDim.x) * (kThreads / 32);
  for (std::size_t row = (std::size_t(blockIdx.x) * kThreads + threadIdx.x) / 32; row < rows; row += warps) {
    float acc = 0;
    for (int c = lane; c < d; c += 32) acc += a[row * d + c] * b[row * d + c];
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(~0u, acc, o);
    if (lane == 0) out[row] = acc;
  }
}
inline void row_dot(const float* dout, const float* o, float* delta, std::size_t rows, int d, cudaStream_t stream) {
  row_dot_kernel<256><<<lab::grid_for(rows * 32, 256), 256, 0, stream>>>(dout, o, delta, rows, d);
}

}  // namespace flash
