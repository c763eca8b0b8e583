// The tensor-core variants' conversions: fp32 to bf16 (their inputs' copies, made before timing)
// and the bf16 transpose the wgmma step needs for V.
#include "attention/attention.cuh"
#include "lab/launch.hpp"

namespace attn {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t work) { return lab::grid_for(work, kThreads); }

__global__ void to_bf16_kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, std::size_t n) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = __float2bfloat16_rn(in[i]);
}

// out[m][c][r] = in[m][r][c] for r < rows, 0 for rows <= r < rows_padded: 32 x 32 tiles through
// shared memory, so that both the reads and the writes are coalesced.
__global__ void transpose_bf16_kernel(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out, int rows,
                                      int cols, int rows_padded) {
  __shared__ __nv_bfloat16 tile[32][34];
  const std::size_t m = blockIdx.z;
  const int r0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
  for (int y = threadIdx.y; y < 32; y += 8) {
    const int r = r0 + y, c = c0 + threadIdx.x;
    tile[y][threadIdx.x] = r < rows && c < cols ? in[(m * rows + r) * cols + c] : __float2bfloat16(0.f);
  }
  __syncthreads();
  for (int y = threadIdx.y; y < 32; y += 8) {
    const int c = c0 + y, r = r0 + threadIdx.x;
    if (c < cols && r < rows_padded) out[(m * cols + c) * rows_padded + r] = tile[threadIdx.x][y];
  }
}

}  // namespace

Bf16Inputs::Bf16Inputs(const Inputs& in, cudaStream_t stream, const float* dout_f32)
    : q(in.dims.elements()), k(in.dims.elements()), v(in.dims.elements()) {
  to_bf16(in.q.data(), q.data(), in.dims.elements(), stream);
  to_bf16(in.k.data(), k.data(), in.dims.elements(), stream);
  to_bf16(in.v.data(), v.data(), in.dims.elements(), stream);
  if (dout_f32) {
    dout = lab::DeviceBuffer<__nv_bfloat16>(in.dims.elements());
    to_bf16(dout_f32, dout.data(), in.dims.elements(), stream);
  }
}

void to_bf16(const float* in, __nv_bfloat16* out, std::size_t n, cudaStream_t stream) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  LAB_CHECK(cudaGetLastError());
}

void transpose_bf16(const __nv_bfloat16* in, __nv_bfloat16* out, int matrices, int rows, int cols, int rows_padded,
                    cudaStream_t stream) {
  const dim3 grid((rows_padded + 31) / 32, (cols + 31) / 32, matrices);
  transpose_bf16_kernel<<<grid, dim3(32, 8), 0, stream>>>(in, out, rows, cols, rows_padded);
  LAB_CHECK(cudaGetLastError());
}

}  // namespace attn
