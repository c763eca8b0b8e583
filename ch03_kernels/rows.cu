// The shared pieces of the row-wise kernels (rows.cuh), compiled once for the chapter.
#include "rows.cuh"

namespace rows {

namespace {
// A block sums a slab of 32 columns: thread (x, y) adds parts y, y + 32, ... of column x (a warp
// reads 32 consecutive floats of one part: coalesced), then the 32 partial sums of each column
// are added in shared memory in a fixed order.
template <class Out>
__global__ void sum_partials_kernel(const float* __restrict__ partial, int parts, int cols, std::size_t pitch,
                                    Out* __restrict__ out) {
  __shared__ float sums[32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (c < cols)
    for (int p = threadIdx.y; p < parts; p += 32) acc += partial[std::size_t(p) * pitch + c];
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.f;
    for (int y = 0; y < 32; ++y) total += sums[y][threadIdx.x];
    out[c] = lab::from_f32<Out>(total);
  }
}
}  // namespace

template <class Out>
void sum_partials(const float* partial, int parts, int cols, std::size_t pitch, Out* out, cudaStream_t s) {
  sum_partials_kernel<<<(cols + 31) / 32, dim3(32, 32), 0, s>>>(partial, parts, cols, pitch, out);
  LAB_CHECK_LAUNCH();
}
template void sum_partials(const float*, int, int, std::size_t, float*, cudaStream_t);
template void sum_partials(const float*, int, int, std::size_t, __nv_bfloat16*, cudaStream_t);
template void sum_partials(const float*, int, int, std::size_t, __half*, cudaStream_t);

}  // namespace rows
