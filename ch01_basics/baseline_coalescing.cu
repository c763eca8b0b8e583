// Baseline transpose: each thread copies in[r][c] straight to out[c][r].
// The reads are coalesced (a warp reads 32 consecutive floats of one row: one 128-byte line), but
// the writes are not: the warp's 32 writes go down a column of out, 32 different lines, each of
// which the memory system must fetch, patch 4 bytes of, and write back. That strided write is
// the bottleneck; optimized_coalescing.cu removes it.
// Run: make ch01 && ./ch01_basics/baseline_coalescing
#include "coalescing.cuh"

namespace {

constexpr int kTile = Coalescing::kTile, kBlockRows = Coalescing::kBlockRows;

__global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int c = blockIdx.x * kTile + threadIdx.x;
  const int r0 = blockIdx.y * kTile + threadIdx.y;
  if (c >= cols) return;
#pragma unroll
  for (int j = 0; j < kTile; j += kBlockRows) {
    const int r = r0 + j;
    if (r < rows) out[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + c];
  }
}

}  // namespace

LAB_VARIANT(Coalescing, baseline, "naive: coalesced reads, strided writes (32 lines touched per warp store)") {
  transpose_naive<<<p.grid(), p.block(), 0, stream>>>(p.in.data(), p.out.data(), p.rows, p.cols);
  LAB_CHECK_LAUNCH();
}
