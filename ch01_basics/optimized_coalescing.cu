// Optimized transpose: a 32x33 shared-memory tile. Both global accesses are coalesced (a warp reads
// a tile row of in and writes a row of out), and the one extra column shifts each tile row by one
// bank, so the warp's 32 reads down a tile column fall in 32 different banks: no conflicts.
// Compared with the baseline, the only change is the staging through the padded tile.
// Run: make ch01 && ./ch01_basics/optimized_coalescing
#include "coalescing.cuh"

namespace {

constexpr int kTile = Coalescing::kTile, kBlockRows = Coalescing::kBlockRows;

__global__ void transpose_tiled_padded(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];  // +1: column k of the tile spreads over all 32 banks
  const int c = blockIdx.x * kTile + threadIdx.x;
  const int r0 = blockIdx.y * kTile + threadIdx.y;
#pragma unroll
  for (int j = 0; j < kTile; j += kBlockRows)
    if (c < cols && r0 + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[static_cast<size_t>(r0 + j) * cols + c];
  __syncthreads();
  const int oc = blockIdx.y * kTile + threadIdx.x;   // a column of out is a row of in
  const int or0 = blockIdx.x * kTile + threadIdx.y;  // a row of out is a column of in
#pragma unroll
  for (int j = 0; j < kTile; j += kBlockRows)
    if (oc < rows && or0 + j < cols) out[static_cast<size_t>(or0 + j) * rows + oc] = tile[threadIdx.x][threadIdx.y + j];
}

}  // namespace

LAB_VARIANT(Coalescing, optimized, "shared-memory tile with padding: coalesced reads and writes, no bank conflicts") {
  transpose_tiled_padded<<<p.grid(), p.block(), 0, stream>>>(p.in.data(), p.out.data(), p.rows, p.cols);
  LAB_CHECK_LAUNCH();
}
