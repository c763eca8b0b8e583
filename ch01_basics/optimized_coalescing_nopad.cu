// Step 1: stage a 32x32 tile in shared memory, so both global accesses are coalesced.
// A block reads its tile row by row (coalesced), and after a barrier writes the transposed tile
// row by row into out (coalesced too): the strided access moved into shared memory, which has no
// 128-byte lines to waste. But reading a tile *column* tile[tx][ty] makes a warp's 32 addresses
// 32 floats apart, all in one of the 32 banks: a 32-way bank conflict that serialises every
// shared-memory read. optimized_coalescing.cu pads the tile by one column to remove it.
// Run: make ch01 && ./ch01_basics/optimized_coalescing_nopad
#include "coalescing.cuh"

namespace {

constexpr int kTile = Coalescing::kTile, kBlockRows = Coalescing::kBlockRows;

__global__ void transpose_tiled_nopad(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTile][kTile];
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

LAB_VARIANT_STEP(Coalescing, 1, "shared-memory tile, no padding: coalesced both ways, 32-way bank conflicts") {
  transpose_tiled_nopad<<<p.grid(), p.block(), 0, stream>>>(p.in.data(), p.out.data(), p.rows, p.cols);
  LAB_CHECK_LAUNCH();
}
