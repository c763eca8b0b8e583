// Hopper's warpgroup matrix multiply-accumulate (wgmma, sm_90a) for the 16-bit attention (bf16, or
// fp16: each product's T, the instruction's type, the rest alike). A warpgroup is 4 consecutive warps; one wgmma computes a 64 x N block of D from A
// (64 x 16) and B (16 x N), reading B (and here A of Q K^T) straight from shared memory through a
// 64-bit matrix descriptor, and runs asynchronously: it is issued, committed to a group, and
// waited for. Its accumulator layout, per warp w of the group (rows 16 w ...), is mma.m16n8's
// repeated along N: d[4 j + e] is row g + 8 (e / 2), column 8 j + 2 t + (e % 2), which is why the
// mma_tiles.cuh softmax helpers take it unchanged (MT = 1, NT = N / 8).
//
// Shared-memory operands are "K-major with the 128-byte swizzle": rows of 64 bf16 (128 bytes),
// 16-byte chunk c of row r stored at chunk c ^ (r % 8) (mma::Layout<64>, whose tiles start on a
// 1024-byte boundary), 8-row groups 1024 bytes apart; a wider K is several such regions. The
// k-th 16-wide slice of a region is the same descriptor with its address advanced by 32 k bytes.
// PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Operations" (wgmma).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/kernels/mma_tiles.cuh"

namespace wgmma {

// The descriptor of a K-major, 128-byte-swizzled operand starting at p (shared memory): start
// address, leading byte offset (unused with this swizzle: 16), stride byte offset 1024 (8 rows of
// 128 bytes), swizzle mode 1 (128 bytes), all in 16-byte units.
__device__ __forceinline__ std::uint64_t descriptor(const void* p) {
  const std::uint32_t a = mma::smem_address(p);
  return std::uint64_t((a & 0x3FFFF) >> 4) | std::uint64_t(1) << 16 | std::uint64_t(1024 >> 4) << 32 |
         std::uint64_t(1) << 62;
}

// The descriptor of an N-major (MN-major) 128-byte-swizzled operand at p: regions of 64 elements of
// N (128 bytes a row) by the K rows, 8-row groups 1024 bytes apart (the stride byte offset), and
// the next 64 of N `region_bytes` further (the leading byte offset). A tile of V (keys x d, d
// contiguous) copied by the TMA in 64-column boxes is this layout for O += P V with N = d, K = keys;
// the k-th 16 keys are the same descriptor advanced by 16 rows (2048 bytes).
__device__ __forceinline__ std::uint64_t descriptor_mn(const void* p, unsigned region_bytes) {
  const std::uint32_t a = mma::smem_address(p);
  return std::uint64_t((a & 0x3FFFF) >> 4) | std::uint64_t(region_bytes >> 4) << 16 |
         std::uint64_t(1024 >> 4) << 32 | std::uint64_t(1) << 62;
}

// Warp specialisation's register split: a warpgroup that only issues copies gives registers back
// (dec) and the computing warpgroups take them (inc), so that they hold more than the launch's even
// share. Every warp of the warpgroup executes it; counts are multiples of 8 in [24, 256].
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Orders this thread's register writes (accumulators, A fragments) before the wgmma that reads them.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's shared-memory writes (cp.async included) visible to the async proxy, which
// wgmma reads shared memory through; before the barrier that publishes a tile.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Copies a Rows x Cols block of a row-major 16-bit matrix (bf16 or fp16) (row stride `stride` elements; rows from
// row0, rows at or past `rows` zero; columns from col0) into Cols / 64 regions of Rows x 64,
// 128-byte swizzled; Threads threads share the work.
template <int Rows, int Cols, int Threads, class T>
__device__ __forceinline__ void load_async(uint4* tile, const T* g, std::size_t stride, int row0, int rows,
                                           int col0) {
  static_assert(sizeof(T) == 2, "a 16-bit element");
  constexpr int kChunks = Cols / 8;
  for (int i = threadIdx.x; i < Rows * kChunks; i += Threads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < rows;
    const T* src = g + std::size_t(valid ? row0 + r : 0) * stride + col0 + 8 * c;
    mma::cp_async16(tile + (c / 8) * Rows * 8 + mma::Layout<64>::offset(r, c % 8), src, valid);
  }
}

// The operands of a wgmma's accumulator: 64 x 64 (32 floats a thread) or 64 x 128 (64), as the
// instruction's register list and as the asm's in-out operands (d[0] the first).
#define LAB_WGMMA_R32                                                                                                  \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                             \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LAB_WGMMA_R64                                                                                                  \
  LAB_WGMMA_R32 ", "                                                                                                   \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                                   \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LAB_WGMMA_D32 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),   \
  "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), \
  "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define LAB_WGMMA_D64 LAB_WGMMA_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
  "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), \
  "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), \
  "+f"(d[62]), "+f"(d[63])

// wgmma.mma_async with T's type in both places: the asm is one string, so the type is chosen by
// `if constexpr` between two spellings of the same statement (MACRO(TYPE): the statement).
#define LAB_WGMMA_TYPED(T, STATEMENT)                                                                                  \
  if constexpr (std::is_same_v<T, __half>)                                                                             \
    STATEMENT("f16");                                                                                                  \
  else                                                                                                                 \
    STATEMENT("bf16")

// d (64 x 64, f32) = a (64 x 16) b (16 x 64) [+ d]: a and b T (bf16 or fp16) in shared memory
// (descriptors), K-major unless TransA (a M-major) or TransB (b N-major).
template <int TransA = 0, int TransB = 0, class T = __nv_bfloat16>
__device__ __forceinline__ void mma_ss(float (&d)[32], std::uint64_t a, std::uint64_t b, bool accumulate) {
#define LAB_ASM(TYPE)                                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {" LAB_WGMMA_R32                \
               "}, %32, %33, p, 1, 1, %35, %36;\n}\n"                                                      \
               : LAB_WGMMA_D32                                                                           \
               : "l"(a), "l"(b), "r"(int(accumulate)), "n"(TransA), "n"(TransB))
  LAB_WGMMA_TYPED(T, LAB_ASM);
#undef LAB_ASM
}

// d (64 x 128, f32) += a (64 x 16, T fragments in registers, the m16n8k16 A layout per warp) b
// (16 x 128, shared memory); TransB as in mma_rs_n64.
template <int TransB = 0, class T = __nv_bfloat16>
__device__ __forceinline__ void mma_rs_n128(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t b) {
#define LAB_ASM(TYPE)                                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {" LAB_WGMMA_R64               \
               "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"                                          \
               : LAB_WGMMA_D64                                                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TransB))
  LAB_WGMMA_TYPED(T, LAB_ASM);
#undef LAB_ASM
}

// d (64 x 128, f32) = a (64 x 16) b (16 x 128) [+ d]: both T in shared memory, K-major unless
// TransA / TransB, as in mma_ss (S = Q K^T for 128 keys; dQ = dS K from dS^T and K as they lie).
template <int TransA = 0, int TransB = 0, class T = __nv_bfloat16>
__device__ __forceinline__ void mma_ss_n128(float (&d)[64], std::uint64_t a, std::uint64_t b, bool accumulate) {
#define LAB_ASM(TYPE)                                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {" LAB_WGMMA_R64               \
               "}, %64, %65, p, 1, 1, %67, %68;\n}\n"                                                      \
               : LAB_WGMMA_D64                                                                           \
               : "l"(a), "l"(b), "r"(int(accumulate)), "n"(TransA), "n"(TransB))
  LAB_WGMMA_TYPED(T, LAB_ASM);
#undef LAB_ASM
}

// d (64 x 64, f32) += a (64 x 16, T fragments in registers) b (16 x 64, shared memory); TransB = 1
// reads b N-major (a tile of V as it lies in memory, d contiguous), 0 K-major.
template <int TransB, class T = __nv_bfloat16>
__device__ __forceinline__ void mma_rs_n64(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t b) {
#define LAB_ASM(TYPE)                                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {" LAB_WGMMA_R32                \
               "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"                                          \
               : LAB_WGMMA_D32                                                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TransB))
  LAB_WGMMA_TYPED(T, LAB_ASM);
#undef LAB_ASM
}

#undef LAB_WGMMA_TYPED
#undef LAB_WGMMA_D64
#undef LAB_WGMMA_D32
#undef LAB_WGMMA_R64
#undef LAB_WGMMA_R32

}  // namespace wgmma
