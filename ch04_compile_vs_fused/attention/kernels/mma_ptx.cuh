// The tensor-core instructions the fused attention kernels are built from, as PTX wrappers: the
// warp-level mma.sync m16n8k16 (bf16 or fp16 inputs, fp32 accumulation) and m16n8k8 (tf32, for 3xTF32),
// ldmatrix to load fragments from shared memory, cp.async to copy tiles from device memory without
// passing through registers (so the next tile's copy runs under this tile's arithmetic), the
// swizzled layout that keeps ldmatrix free of bank conflicts, and small conversions (tf32 splits,
// 16-bit pairs, paired atomics). The attention schedule built on them is in mma_tiles.cuh.
// The fragment layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16"): lane l holds rows
// l/4 and l/4 + 8, columns 2 (l%4) and 2 (l%4) + 1 of a 16 x 8 result.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace mma {

// A rows x D tile of bf16 in shared memory, rows of D/8 16-byte chunks. The chunk index is XORed
// with a function of the row so that the 8 rows one ldmatrix reads (same logical chunk) fall in 8
// different 16-byte bank groups, whatever D: rows share a 128-byte line when D < 64.
template <int D>
struct Layout {
  static constexpr int kChunks = D / 8;
  static constexpr int kRowsPerLine = kChunks >= 8 ? 1 : 8 / kChunks;
  __device__ __forceinline__ static int offset(int row, int chunk) {  // in 16-byte units
    const int f = kChunks >= 8 ? (row & 7) : ((row / kRowsPerLine) & (kChunks - 1));
    return row * kChunks + (chunk ^ f);
  }
};

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, asynchronously; zeros instead when !valid.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Copies rows [row0, row0 + Rows) of a row-major 16-bit matrix (bf16 or fp16; D columns, `rows`
// rows) into a swizzled tile, zeros past the last row; `threads` threads share the work.
template <int Rows, int D, int Threads, class T>
__device__ __forceinline__ void load_tile_async(uint4* tile, const T* g, int row0, int rows) {
  static_assert(sizeof(T) == 2, "a 16-bit element");
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < Rows * kChunks; i += Threads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < rows;
    const T* src = g + std::size_t(valid ? row0 + r : 0) * D + 8 * c;
    cp_async16(tile + Layout<D>::offset(r, c), src, valid);
  }
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}

// d += a b for a 16 x 16 (row) by 16 x 8 (col) product of T values (__nv_bfloat16 or __half): the
// same fragments, the same fp32 accumulation, the instruction's type bf16 or f16 (fp16's 11
// significant bits against bf16's 8, its range up to 65504 against bf16's fp32 range).
template <class T>
__device__ __forceinline__ void mma16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                      std::uint32_t b1) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or fp16");
#define LAB_MMA16(TYPE)                                                                                          \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE                                            \
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                          \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                   \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
  if constexpr (std::is_same_v<T, __half>)
    LAB_MMA16("f16");
  else
    LAB_MMA16("bf16");
#undef LAB_MMA16
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  mma16<__nv_bfloat16>(d, a, b0, b1);
}

// fp32 as a sum of two tf32 values (10-bit mantissas): x = big + small + e with |e| <= 2^-21 |x|
// about, where tf32 alone keeps 2^-11. big is x rounded to tf32 (add half of tf32's last place,
// clear the 13 low bits), x - big is exact in fp32, and small is it truncated to tf32. Three tf32
// mma instructions (small b_big, big b_small, big b_big; small b_small is below fp32's rounding)
// then give a product with fp32 accuracy: the "3xTF32" of CUTLASS and of PyTorch's fp32 attention.
// Four integer and fp32 instructions; cvt.rna.tf32.f32, twice, would take about three times as many
// (it handles infinities and NaN, which attention's inputs do not hold).
struct Split {
  std::uint32_t big, small;
};
__device__ __forceinline__ Split split_tf32(float x) {
  const std::uint32_t big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  return {big, __float_as_uint(x - __uint_as_float(big)) & 0xffffe000u};
}

// d += a b for a 16 x 8 (row) by 8 x 8 (col) product of tf32 values. Fragments (PTX ISA,
// "mma.m16n8k8" for .tf32): a = (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); b = (t, g),
// (t + 4, g); d as for m16n8k16. g = lane / 4, t = lane % 4.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a b in 3xTF32 from split fragments.
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Split (&a)[4], Split b0, Split b1) {
  const std::uint32_t ab[4] = {a[0].big, a[1].big, a[2].big, a[3].big};
  const std::uint32_t as[4] = {a[0].small, a[1].small, a[2].small, a[3].small};
  mma_tf32(d, as, b0.big, b1.big);
  mma_tf32(d, ab, b0.small, b1.small);
  mma_tf32(d, ab, b0.big, b1.big);
}

// Copies rows [row0, row0 + Rows) of a row-major fp32 matrix (D columns, `rows` rows) into a
// shared tile whose rows are Stride floats apart (the padding chooses the banks), zeros past the
// last row; `Threads` threads share the work.
template <int Rows, int D, int Stride, int Threads>
__device__ __forceinline__ void load_rows_async(float* tile, const float* g, int row0, int rows) {
  constexpr int kChunks = D / 4;
  for (int i = threadIdx.x; i < Rows * kChunks; i += Threads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < rows;
    cp_async16(tile + r * Stride + 4 * c, g + std::size_t(valid ? row0 + r : 0) * D + 4 * c, valid);
  }
}

// at[0] += x, at[1] += y in device memory, atomically: one 8-byte vector atomic on sm_90 and
// later (the L2 then handles each 32-byte sector once rather than twice), two otherwise.
__device__ __forceinline__ void atomic_add2(float* at, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(at), make_float2(x, y));
#else
  atomicAdd(at, x);
  atomicAdd(at + 1, y);
#endif
}

// a and b (columns col and col + 1 of a row of T, bf16 or fp16, at r - col) rounded to nearest,
// even, and stored at r[0] and r[1], leaving the columns from `cols` on (a head's padding)
// unwritten: one 4-byte store where both are in the row and r is aligned to it, else one store each.
template <class T>
__device__ __forceinline__ void store16_pair(T* r, int col, int cols, float a, float b) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or fp16");
  if (col + 1 < cols && reinterpret_cast<std::uintptr_t>(r) % 4 == 0) {
    if constexpr (std::is_same_v<T, __half>)
      *reinterpret_cast<__half2*>(r) = __floats2half2_rn(a, b);
    else
      *reinterpret_cast<__nv_bfloat162*>(r) = __floats2bfloat162_rn(a, b);
  } else if constexpr (std::is_same_v<T, __half>) {
    if (col < cols) r[0] = __float2half_rn(a);
    if (col + 1 < cols) r[1] = __float2half_rn(b);
  } else {
    if (col < cols) r[0] = __float2bfloat16(a);
    if (col + 1 < cols) r[1] = __float2bfloat16(b);
  }
}
__device__ __forceinline__ void store_bf16_pair(__nv_bfloat16* r, int col, int cols, float a, float b) {
  store16_pair(r, col, cols, a, b);
}

// Two floats as a bf16 pair (lo in the low half: the lower column).
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
// Two floats as a pair of T (bf16 or fp16), rounded to nearest, even.
template <class T>
__device__ __forceinline__ std::uint32_t pack16(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    return pack_bf16(lo, hi);
  }
}

}  // namespace mma
