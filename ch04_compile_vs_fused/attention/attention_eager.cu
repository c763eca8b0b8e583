// Eager mode's attention, as a framework runs the textbook formula: the cuBLAS products, one
// kernel per element-wise operation (scale, mask), the row softmax, and what the backward
// variants keep of the forward (P, or O and the log-sum-exp) with the row sums of dO o O.
#include <algorithm>
#include <limits>

#include "attention/attention.cuh"
#include "attention/kernels/flash_tiles.cuh"
#include "lab/launch.hpp"

namespace attn {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t work) { return lab::grid_for(work, kThreads); }

// Eager's `S * scale`: one element-wise kernel, 16-byte accesses, the last n % 4 elements one by one.
__global__ void scale_kernel(const float* __restrict__ in, float* __restrict__ out, std::size_t n, float scale) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x, quads = n / 4;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < quads; i += stride) {
    float4 x = reinterpret_cast<const float4*>(in)[i];
    x.x *= scale, x.y *= scale, x.z *= scale, x.w *= scale;
    reinterpret_cast<float4*>(out)[i] = x;
  }
  for (std::size_t i = 4 * quads + std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = in[i] * scale;
}

// Eager's `S.masked_fill_(mask, -inf)`: the entries above the diagonal of every seq x seq matrix.
__global__ void causal_mask_kernel(float* s, std::size_t n, int seq, float fill) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::size_t in_head = i % (std::size_t(seq) * seq);
    if (in_head % seq > in_head / seq) s[i] = fill;
  }
}

// (max, sum of exp(x - max)) pairs combined: the online softmax's step.
struct MaxSum {
  float m, l;
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.l * __expf(a.m - m) + b.l * __expf(b.m - m)};
}

// Eager's softmax: a block a row. Pass 1 keeps a running (max, sum) per thread over its strided
// elements (one read), then the block combines them; pass 2 reads the row again (from L2: a row
// is at most 256 KiB) and writes exp(x - max) / sum. Masked entries (-inf) give 0.
__global__ void softmax_kernel(const float* __restrict__ s, float* __restrict__ p, float* __restrict__ lse, int cols) {
  const std::size_t row = blockIdx.x;
  const float* in = s + row * cols;
  float* out = p + row * cols;
  MaxSum t{-INFINITY, 0.f};
  for (int j = threadIdx.x; j < cols; j += blockDim.x) t = combine(t, MaxSum{in[j], 1.f});
  for (int o = 16; o > 0; o /= 2) t = combine(t, MaxSum{__shfl_xor_sync(~0u, t.m, o), __shfl_xor_sync(~0u, t.l, o)});
  __shared__ MaxSum warps[kThreads / 32];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = t;
  __syncthreads();
  MaxSum all = warps[0];
  for (int w = 1; w < kThreads / 32; ++w) all = combine(all, warps[w]);
  const float inv = 1.f / all.l;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = __expf(in[j] - all.m) * inv;
  if (lse && threadIdx.x == 0) lse[row] = all.m + logf(all.l);
}

// Eager's softmax backward: a block a row; the row's sum of p dp, then ds = p (dp - sum), both
// reads of the row second from L2.
__global__ void softmax_backward_kernel(const float* __restrict__ p, const float* __restrict__ dp,
                                        float* __restrict__ ds, int cols) {
  const std::size_t off = std::size_t(blockIdx.x) * cols;
  float t = 0;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) t += p[off + j] * dp[off + j];
  for (int o = 16; o > 0; o /= 2) t += __shfl_xor_sync(~0u, t, o);
  __shared__ float warps[kThreads / 32];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = t;
  __syncthreads();
  float dot = 0;
  for (int w = 0; w < kThreads / 32; ++w) dot += warps[w];
  for (int j = threadIdx.x; j < cols; j += blockDim.x) ds[off + j] = p[off + j] * (dp[off + j] - dot);
}

}  // namespace

void gemm_nt(cublasHandle_t blas, const Dims& a, float alpha, const float* A, const float* B, float* C) {
  // Row-major C = A B^T is column-major C^T = B A^T: cuBLAS sees A, B as d x seq (lda d).
  const float zero = 0.f;
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  LAB_CHECK(cublasSgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, a.seq, a.seq, a.d, &alpha, B, a.d, sd, A, a.d,
                                      sd, &zero, C, a.seq, ss, a.bh()));
}

void gemm_nn(cublasHandle_t blas, const Dims& a, float alpha, const float* P, const float* X, float* C) {
  // Row-major C = P X is column-major C^T (d x seq) = X^T P^T.
  const float zero = 0.f;
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  LAB_CHECK(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, a.d, a.seq, a.seq, &alpha, X, a.d, sd, P, a.seq,
                                      ss, &zero, C, a.d, sd, a.bh()));
}

void gemm_tn(cublasHandle_t blas, const Dims& a, float alpha, const float* P, const float* X, float* C) {
  // Row-major C = P^T X is column-major C^T = X^T P: P's buffer read column-major is P^T, so op T.
  const float zero = 0.f;
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  LAB_CHECK(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_T, a.d, a.seq, a.seq, &alpha, X, a.d, sd, P, a.seq,
                                      ss, &zero, C, a.d, sd, a.bh()));
}

namespace {
// Column-major C (m x n, ldc, stride sc) = alpha op(A) op(B) over bh matrices, A and B in bf16.
void batched_bf16(cublasHandle_t blas, const Dims& a, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                  float alpha, const __nv_bfloat16* A, int lda, long long sa, const __nv_bfloat16* B, int ldb,
                  long long sb, float* C, int ldc, long long sc) {
  const float zero = 0.f;
  LAB_CHECK(cublasGemmStridedBatchedEx(blas, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, sa, B, CUDA_R_16BF, ldb, sb,
                                       &zero, C, CUDA_R_32F, ldc, sc, a.bh(), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
}  // namespace

// The fp32 products' operands and layouts, above, in bf16.
void gemm_nt(cublasHandle_t blas, const Dims& a, float alpha, const __nv_bfloat16* A, const __nv_bfloat16* B,
             float* C) {
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  batched_bf16(blas, a, CUBLAS_OP_T, CUBLAS_OP_N, a.seq, a.seq, a.d, alpha, B, a.d, sd, A, a.d, sd, C, a.seq, ss);
}
void gemm_nn(cublasHandle_t blas, const Dims& a, float alpha, const __nv_bfloat16* P, const __nv_bfloat16* X,
             float* C) {
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  batched_bf16(blas, a, CUBLAS_OP_N, CUBLAS_OP_N, a.d, a.seq, a.seq, alpha, X, a.d, sd, P, a.seq, ss, C, a.d, sd);
}
void gemm_tn(cublasHandle_t blas, const Dims& a, float alpha, const __nv_bfloat16* P, const __nv_bfloat16* X,
             float* C) {
  const long long sd = (long long)a.seq * a.d, ss = (long long)a.seq * a.seq;
  batched_bf16(blas, a, CUBLAS_OP_N, CUBLAS_OP_T, a.d, a.seq, a.seq, alpha, X, a.d, sd, P, a.seq, ss, C, a.d, sd);
}

void use_stream(cublasHandle_t blas, cudaStream_t stream) {
  LAB_CHECK(cublasSetStream(blas, stream));
  LAB_CHECK(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));
}

const lab::jit::RowKernel& compiled_row_kernel(lab::jit::RowOp op, const Dims& a) {
  static std::mutex m;
  static std::map<std::tuple<lab::jit::RowOp, int, bool>, lab::jit::RowKernel> kernels;
  std::lock_guard lock(m);
  const auto key = std::tuple{op, a.d, a.causal};
  auto it = kernels.find(key);
  if (it == kernels.end()) {
    const lab::jit::Expr e = op == lab::jit::RowOp::softmax ? compiled_prologue(a.scale(), a.causal)
                                                            : compiled_epilogue(a.scale(), a.causal);
    it = kernels.emplace(key, lab::jit::RowKernel::build(op, e, lab::jit::Cache::global(), "attention")).first;
  }
  return it->second;
}

void eager_forward(cublasHandle_t blas, const Dims& a, const float* q, const float* k, const float* v, float* scores,
                   float* probs, float* o, float* lse, cudaStream_t stream) {
  use_stream(blas, stream);
  const std::size_t n = a.scores();
  gemm_nt(blas, a, 1.f, q, k, scores);            // S = Q K^T
  scale(scores, probs, n, a.scale(), stream);     // S * scale
  if (a.causal) causal_mask(probs, a, -INFINITY, stream);  // masked_fill(-inf)
  softmax_rows(probs, scores, lse, a.rows(), a.seq, stream);  // P
  gemm_nn(blas, a, 1.f, scores, v, o);                        // O = P V
}

void softmax_rows(const float* s, float* p, float* lse, std::size_t rows, int cols, cudaStream_t stream) {
  softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(s, p, lse, cols);
  LAB_CHECK(cudaGetLastError());
}

void softmax_backward_rows(const float* p, const float* dp, float* ds, std::size_t rows, int cols,
                           cudaStream_t stream) {
  softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(p, dp, ds, cols);
  LAB_CHECK(cudaGetLastError());
}

void scale(const float* in, float* out, std::size_t n, float scale, cudaStream_t stream) {
  scale_kernel<<<blocks_for(n / 4 + 1), kThreads, 0, stream>>>(in, out, n, scale);
  LAB_CHECK(cudaGetLastError());
}

void causal_mask(float* s, const Dims& a, float fill, cudaStream_t stream) {
  causal_mask_kernel<<<blocks_for(a.scores()), kThreads, 0, stream>>>(s, a.scores(), a.seq, fill);
  LAB_CHECK(cudaGetLastError());
}

SavedProbs::SavedProbs(cublasHandle_t blas, const Inputs& in, cudaStream_t stream) : probs(in.dims.scores()) {
  lab::DeviceBuffer<float> scratch(in.dims.scores()), out(in.dims.elements());
  eager_forward(blas, in.dims, in.q.data(), in.k.data(), in.v.data(), probs.data(), scratch.data(), out.data(), nullptr,
                stream);
  LAB_CHECK(cudaStreamSynchronize(stream));
}

SavedOutput::SavedOutput(const Inputs& in, cudaStream_t stream)
    : o(in.dims.elements()), lse(in.dims.rows()), delta(in.dims.rows()) {
  const Dims& dims = in.dims;
  {
    lab::CublasHandle blas;
    // Heads a group at a time, so the scratch stays near 256 MiB (at least one head).
    const std::size_t per_head = std::size_t(dims.seq) * dims.seq;
    const int group = static_cast<int>(std::clamp<std::size_t>((std::size_t(64) << 20) / per_head, 1, dims.bh()));
    lab::DeviceBuffer<float> s1(per_head * group), s2(per_head * group);
    const std::size_t head = std::size_t(dims.seq) * dims.d;
    for (int h = 0; h < dims.bh(); h += group) {
      Dims part = dims;
      part.batch = std::min(group, dims.bh() - h), part.heads = 1;
      eager_forward(blas, part, in.q.data() + h * head, in.k.data() + h * head, in.v.data() + h * head, s1.data(),
                    s2.data(), o.data() + h * head, lse.data() + std::size_t(h) * dims.seq, stream);
    }
    LAB_CHECK(cudaStreamSynchronize(stream));
  }
  lab::reset_device_memory_peak();
}

void SavedOutput::prologue(const Dims& a, const float* dout, float* dq, cudaStream_t stream) {
  flash::row_dot(dout, o.data(), delta.data(), a.rows(), a.d, stream);
  LAB_CHECK(cudaGetLastError());
  LAB_CHECK(cudaMemsetAsync(dq, 0, a.elements() * sizeof(float), stream));
}

}  // namespace attn
