// The GPT-2 model's eager operators (gpt2_eager.cuh): simple kernels, one an operation, written as
// a framework's generic kernels are: grid-stride element loops, a block a row for the row
// operations (LayerNorm, log-softmax; a row read two or three times, from L2 after the first), and
// column sums (bias and LayerNorm parameter gradients) by tiles of 32 columns x 64 rows whose
// partial sums are added atomically.
#include <cmath>
#include <type_traits>

#include "gpt2/eager/block_reduce.cuh"
#include "gpt2/eager/gpt2_eager.cuh"
#include "lab/check.hpp"
#include "lab/launch.hpp"

namespace gpt2::eager {

namespace {

constexpr int kThreads = 256;
unsigned blocks_for(std::size_t work) { return lab::grid_for(work, kThreads); }

__device__ float block_sum(float v) { return blockwide::sum<kThreads>(v); }
__device__ float block_max(float v) { return blockwide::max<kThreads>(v); }

// ---- element-wise ---------------------------------------------------------------------------

__global__ void add_bias_kernel(float* y, const float* __restrict__ b, std::size_t n, int cols) {
  for (std::size_t i : lab::grid_stride(n)) y[i] += b[i % cols];
}

__global__ void embedding_kernel(const float* __restrict__ wte, const std::int32_t* __restrict__ tokens,
                                 float* __restrict__ out, std::size_t n, int d) {
  for (std::size_t i : lab::grid_stride(n)) out[i] = wte[std::size_t(tokens[i / d]) * d + i % d];
}

__global__ void add_positions_kernel(float* x, const float* __restrict__ wpe, std::size_t n, int context, int d) {
  for (std::size_t i : lab::grid_stride(n)) x[i] += wpe[(i / d % context) * d + i % d];
}

// A position's gradient added to its token's row: positions holding the same token collide, so
// the additions are atomic (PyTorch sorts the ids instead; both sum the same terms).
__global__ void embedding_backward_kernel(const float* __restrict__ dx, const std::int32_t* __restrict__ tokens,
                                          float* dwte, std::size_t n, int d) {
  for (std::size_t i : lab::grid_stride(n)) atomicAdd(&dwte[std::size_t(tokens[i / d]) * d + i % d], dx[i]);
}

// dwpe[t][j] = sum over b of dx[b][t][j], a thread an element of wpe's first `context` rows.
__global__ void positions_backward_kernel(const float* __restrict__ dx, float* __restrict__ dwpe, int batch,
                                          int context, int d) {
  const std::size_t n = std::size_t(context) * d;
  for (std::size_t i : lab::grid_stride(n)) {
    float s = 0;
    for (int b = 0; b < batch; ++b) s += dx[std::size_t(b) * n + i];
    dwpe[i] = s;
  }
}

// GELU in fp32 whatever the types it reads and writes (float, or bf16 under autocast).
__device__ float gelu_of(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }
__device__ float gelu_grad(float v) {
  const float cdf = 0.5f * (1.f + erff(v * 0.70710678118654752f));
  const float pdf = expf(-0.5f * v * v) * 0.39894228040143268f;
  return cdf + v * pdf;
}
__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ T from_float(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return __float2bfloat16_rn(v);
}

template <class T>
__global__ void gelu_kernel(const T* __restrict__ x, T* __restrict__ y, std::size_t n) {
  for (std::size_t i : lab::grid_stride(n)) y[i] = from_float<T>(gelu_of(to_float(x[i])));
}

template <class T>
__global__ void gelu_backward_kernel(const float* __restrict__ dy, const T* __restrict__ x, float* __restrict__ dx,
                                     std::size_t n) {
  for (std::size_t i : lab::grid_stride(n)) dx[i] = dy[i] * gelu_grad(to_float(x[i]));
}

__global__ void to_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y, std::size_t n) {
  for (std::size_t i : lab::grid_stride(n)) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void add_kernel(const float* a, const float* b, float* out, std::size_t n) {
  for (std::size_t i : lab::grid_stride(n)) out[i] = a[i] + b[i];
}

// Element i of the (B, h, T, hd) tensor and its place in the rows: (b T + t) ld + head hd + c.
__global__ void heads_kernel(const float* __restrict__ src, float* __restrict__ dst, int ld, int context, int h,
                             int hd, std::size_t n, bool to_heads) {
  for (std::size_t i : lab::grid_stride(n)) {
    const std::size_t c = i % hd, t = i / hd % context, bh = i / (std::size_t(hd) * context);
    const std::size_t b = bh / h, head = bh % h;
    const std::size_t r = (b * context + t) * ld + head * hd + c;
    if (to_heads)
      dst[i] = src[r];
    else
      dst[r] = src[i];
  }
}

__global__ void nll_loss_backward_kernel(const std::int32_t* __restrict__ targets, float* g, std::size_t rows,
                                         int vocab) {
  for (std::size_t r : lab::grid_stride(rows)) g[r * vocab + targets[r]] = -1.f / float(rows);
}

__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, std::size_t n, float decay, float b1, float b2, float one_b1,
                             float one_b2, float step_size, float inv_sqrt_bc2, float eps) {
  for (std::size_t i : lab::grid_stride(n)) {
    const float gi = g[i];
    const float mi = b1 * m[i] + one_b1 * gi, vi = b2 * v[i] + one_b2 * gi * gi;
    m[i] = mi, v[i] = vi;
    p[i] = p[i] * decay - step_size * (mi / (sqrtf(vi) * inv_sqrt_bc2 + eps));
  }
}

// ---- rows: a block a row ----------------------------------------------------------------------

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, float* __restrict__ mean_out,
                                  float* __restrict__ rstd_out, int d) {
  const std::size_t row = blockIdx.x;
  const float* xr = x + row * d;
  float s = 0;
  for (int j = threadIdx.x; j < d; j += kThreads) s += xr[j];
  const float mean = block_sum(s) * (1.f / d);
  float q = 0;
  for (int j = threadIdx.x; j < d; j += kThreads) {
    const float c = xr[j] - mean;
    q += c * c;
  }
  const float rstd = rsqrtf(block_sum(q) * (1.f / d) + float(kLayerNormEps));
  for (int j = threadIdx.x; j < d; j += kThreads) y[row * d + j] = (xr[j] - mean) * rstd * w[j] + b[j];
  if (threadIdx.x == 0) mean_out[row] = mean, rstd_out[row] = rstd;
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w.
__global__ void layer_norm_backward_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                           const float* __restrict__ w, const float* __restrict__ mean,
                                           const float* __restrict__ rstd, float* __restrict__ dx, int d) {
  const std::size_t row = blockIdx.x;
  const float mu = mean[row], rs = rstd[row];
  float sg = 0, sgx = 0;
  for (int j = threadIdx.x; j < d; j += kThreads) {
    const float g = dy[row * d + j] * w[j];
    sg += g;
    sgx += g * (x[row * d + j] - mu) * rs;
  }
  const float mean_g = block_sum(sg) * (1.f / d), mean_gx = block_sum(sgx) * (1.f / d);
  for (int j = threadIdx.x; j < d; j += kThreads) {
    const float g = dy[row * d + j] * w[j], xhat = (x[row * d + j] - mu) * rs;
    dx[row * d + j] = rs * (g - mean_g - xhat * mean_gx);
  }
}

__global__ void log_softmax_kernel(const float* __restrict__ z, float* __restrict__ logp, int vocab) {
  const std::size_t row = blockIdx.x;
  const float* zr = z + row * vocab;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += kThreads) mx = fmaxf(mx, zr[j]);
  mx = block_max(mx);
  float s = 0;
  for (int j = threadIdx.x; j < vocab; j += kThreads) s += expf(zr[j] - mx);
  const float log_s = logf(block_sum(s));
  for (int j = threadIdx.x; j < vocab; j += kThreads) logp[row * vocab + j] = zr[j] - mx - log_s;
}

// g <- g - exp(logp) rowsum(g): every thread has the row's sum before any writes.
__global__ void log_softmax_backward_kernel(float* g, const float* __restrict__ logp, int vocab) {
  const std::size_t row = blockIdx.x;
  float s = 0;
  for (int j = threadIdx.x; j < vocab; j += kThreads) s += g[row * vocab + j];
  s = block_sum(s);
  for (int j = threadIdx.x; j < vocab; j += kThreads) g[row * vocab + j] -= expf(logp[row * vocab + j]) * s;
}

// The mean of -logp at the targets: one block, a sum over the rows, then / rows.
__global__ void nll_loss_kernel(const float* __restrict__ logp, const std::int32_t* __restrict__ targets,
                                float* __restrict__ loss, std::size_t rows, int vocab) {
  float s = 0;
  for (std::size_t r = threadIdx.x; r < rows; r += kThreads) s += logp[r * vocab + targets[r]];
  s = block_sum(s);
  if (threadIdx.x == 0) loss[0] = -s / float(rows);
}

// ---- columns: tiles of 32 columns x kTileRows rows, 32 x 8 threads --------------------------

constexpr int kTileRows = 64;

// out[j] += sum over the tile's rows of a[r][j] (out zeroed before the launch).
__global__ void column_sums_kernel(const float* __restrict__ a, float* out, std::size_t rows, int cols) {
  const int col = blockIdx.x * 32 + threadIdx.x;
  const std::size_t r0 = std::size_t(blockIdx.y) * kTileRows, r1 = rows < r0 + kTileRows ? rows : r0 + kTileRows;
  float s = 0;
  if (col < cols)
    for (std::size_t r = r0 + threadIdx.y; r < r1; r += 8) s += a[r * cols + col];
  __shared__ float part[8][33];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float t = 0;
    for (int k = 0; k < 8; ++k) t += part[k][threadIdx.x];
    atomicAdd(&out[col], t);
  }
}

// dw[j] += sum of dy xhat, db[j] += sum of dy over the tile's rows (dw, db zeroed before).
__global__ void layer_norm_params_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                         const float* __restrict__ mean, const float* __restrict__ rstd, float* dw,
                                         float* db, std::size_t rows, int d) {
  const int col = blockIdx.x * 32 + threadIdx.x;
  const std::size_t r0 = std::size_t(blockIdx.y) * kTileRows, r1 = rows < r0 + kTileRows ? rows : r0 + kTileRows;
  float sw = 0, sb = 0;
  if (col < d)
    for (std::size_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const float g = dy[r * d + col];
      sw += g * ((x[r * d + col] - mean[r]) * rstd[r]);
      sb += g;
    }
  __shared__ float pw[8][33], pb[8][33];
  pw[threadIdx.y][threadIdx.x] = sw, pb[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    float tw = 0, tb = 0;
    for (int k = 0; k < 8; ++k) tw += pw[k][threadIdx.x], tb += pb[k][threadIdx.x];
    atomicAdd(&dw[col], tw);
    atomicAdd(&db[col], tb);
  }
}

dim3 column_grid(std::size_t rows, int cols) {
  return dim3(static_cast<unsigned>(lab::ceil_div(cols, 32)), static_cast<unsigned>(lab::ceil_div(rows, kTileRows)));
}

void zero(float* p, std::size_t n, cudaStream_t stream) { LAB_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream)); }

}  // namespace

void use_stream(cublasHandle_t blas, cudaStream_t stream) {
  LAB_CHECK(cublasSetStream(blas, stream));
  LAB_CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
}

// Row-major products through column-major cuBLAS: a row-major M x N matrix is a column-major
// N x M one (its transpose), so Y = X W^T is Y^T = W X^T, and so on. COMPUTE_32F: fp32 arithmetic.
void linear(cublasHandle_t blas, const float* X, const float* W, float* Y, int M, int N, int K) {
  const float one = 1, zero_ = 0;
  LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, CUDA_R_32F, K, X, CUDA_R_32F, K, &zero_, Y,
                         CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
void linear_backward_input(cublasHandle_t blas, const float* dY, const float* W, float* dX, int M, int N, int K) {
  const float one = 1, zero_ = 0;  // dX^T (K x M) = W^T (K x N) dY^T (N x M)
  LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, &one, W, CUDA_R_32F, K, dY, CUDA_R_32F, N, &zero_,
                         dX, CUDA_R_32F, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
void linear_backward_weight(cublasHandle_t blas, const float* dY, const float* X, float* dW, int M, int N, int K) {
  const float one = 1, zero_ = 0;  // dW^T (K x N) = X^T (K x M) dY (M x N)
  LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, &one, X, CUDA_R_32F, K, dY, CUDA_R_32F, N, &zero_,
                         dW, CUDA_R_32F, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void linear_backward(cublasHandle_t blas, const float* dY, const float* X, const float* W, float* dX, float* dW,
                     float* db, int M, int N, int K, cudaStream_t stream) {
  linear_backward_input(blas, dY, W, dX, M, N, K);
  linear_backward_weight(blas, dY, X, dW, M, N, K);
  if (db) bias_backward(dY, db, M, N, stream);
}

// The same three products with bf16 operands: cuBLAS on the tensor cores, fp32 accumulation
// (CUBLAS_COMPUTE_32F: each product of two bf16 values is exact in fp32) and an fp32 output.
namespace {
void gemm_bf16(cublasHandle_t blas, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
               const __nv_bfloat16* A, int lda, const __nv_bfloat16* B, int ldb, float* C, int ldc) {
  const float one = 1, zero_ = 0;
  LAB_CHECK(cublasGemmEx(blas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &zero_, C, CUDA_R_32F,
                         ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
}  // namespace
void linear(cublasHandle_t blas, const __nv_bfloat16* X, const __nv_bfloat16* W, float* Y, int M, int N, int K) {
  gemm_bf16(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, W, K, X, K, Y, N);
}
void linear_backward(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* X, const __nv_bfloat16* W,
                     float* dX, float* dW, int M, int N, int K) {
  gemm_bf16(blas, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, W, K, dY, N, dX, K);  // dX^T = W^T dY^T
  gemm_bf16(blas, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, X, K, dY, N, dW, K);  // dW^T = X^T dY
}

void add_bias(float* y, const float* b, std::size_t rows, int cols, cudaStream_t stream) {
  add_bias_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(y, b, rows * cols, cols);
  LAB_CHECK(cudaGetLastError());
}
void bias_backward(const float* dy, float* db, std::size_t rows, int cols, cudaStream_t stream) {
  zero(db, cols, stream);
  column_sums_kernel<<<column_grid(rows, cols), dim3(32, 8), 0, stream>>>(dy, db, rows, cols);
  LAB_CHECK(cudaGetLastError());
}

void embedding(const float* wte, const std::int32_t* tokens, float* out, std::size_t rows, int d, cudaStream_t stream) {
  embedding_kernel<<<blocks_for(rows * d), kThreads, 0, stream>>>(wte, tokens, out, rows * d, d);
  LAB_CHECK(cudaGetLastError());
}
void add_positions(float* x, const float* wpe, int batch, int context, int d, cudaStream_t stream) {
  const std::size_t n = std::size_t(batch) * context * d;
  add_positions_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, wpe, n, context, d);
  LAB_CHECK(cudaGetLastError());
}
void embedding_backward(const float* dx, const std::int32_t* tokens, float* dwte, std::size_t rows, int vocab, int d,
                        cudaStream_t stream) {
  zero(dwte, std::size_t(vocab) * d, stream);
  embedding_backward_kernel<<<blocks_for(rows * d), kThreads, 0, stream>>>(dx, tokens, dwte, rows * d, d);
  LAB_CHECK(cudaGetLastError());
}
void positions_backward(const float* dx, float* dwpe, int batch, int context, int d, cudaStream_t stream) {
  positions_backward_kernel<<<blocks_for(std::size_t(context) * d), kThreads, 0, stream>>>(dx, dwpe, batch, context,
                                                                                          d);
  LAB_CHECK(cudaGetLastError());
  zero(dwpe + std::size_t(context) * d, std::size_t(kPositions - context) * d, stream);
}

void layer_norm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, std::size_t rows,
                int d, cudaStream_t stream) {
  layer_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, b, y, mean, rstd, d);
  LAB_CHECK(cudaGetLastError());
}
void layer_norm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                         float* dx, float* dw, float* db, std::size_t rows, int d, cudaStream_t stream) {
  layer_norm_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(dy, x, w, mean, rstd, dx, d);
  LAB_CHECK(cudaGetLastError());
  zero(dw, d, stream);
  zero(db, d, stream);
  layer_norm_params_kernel<<<column_grid(rows, d), dim3(32, 8), 0, stream>>>(dy, x, mean, rstd, dw, db, rows, d);
  LAB_CHECK(cudaGetLastError());
}

void gelu(const float* x, float* y, std::size_t n, cudaStream_t stream) {
  gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  LAB_CHECK(cudaGetLastError());
}
void gelu_backward(const float* dy, const float* x, float* dx, std::size_t n, cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, x, dx, n);
  LAB_CHECK(cudaGetLastError());
}
void gelu(const __nv_bfloat16* x, __nv_bfloat16* y, std::size_t n, cudaStream_t stream) {
  gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  LAB_CHECK(cudaGetLastError());
}
void gelu_backward(const float* dy, const __nv_bfloat16* x, float* dx, std::size_t n, cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, x, dx, n);
  LAB_CHECK(cudaGetLastError());
}
void to_bf16(const float* x, __nv_bfloat16* y, std::size_t n, cudaStream_t stream) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  LAB_CHECK(cudaGetLastError());
}
void add(const float* a, const float* b, float* out, std::size_t n, cudaStream_t stream) {
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
  LAB_CHECK(cudaGetLastError());
}

void split_heads(const float* rows, int ld, float* heads, int batch, int context, int h, int hd, cudaStream_t stream) {
  const std::size_t n = std::size_t(batch) * h * context * hd;
  heads_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rows, heads, ld, context, h, hd, n, true);
  LAB_CHECK(cudaGetLastError());
}
void merge_heads(const float* heads, float* rows, int ld, int batch, int context, int h, int hd, cudaStream_t stream) {
  const std::size_t n = std::size_t(batch) * h * context * hd;
  heads_kernel<<<blocks_for(n), kThreads, 0, stream>>>(heads, rows, ld, context, h, hd, n, false);
  LAB_CHECK(cudaGetLastError());
}

void log_softmax(const float* logits, float* logp, std::size_t rows, int vocab, cudaStream_t stream) {
  log_softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, logp, vocab);
  LAB_CHECK(cudaGetLastError());
}
void nll_loss(const float* logp, const std::int32_t* targets, float* loss, std::size_t rows, int vocab,
              cudaStream_t stream) {
  nll_loss_kernel<<<1, kThreads, 0, stream>>>(logp, targets, loss, rows, vocab);
  LAB_CHECK(cudaGetLastError());
}
void nll_loss_backward(const std::int32_t* targets, float* g, std::size_t rows, int vocab, cudaStream_t stream) {
  zero(g, rows * vocab, stream);
  nll_loss_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(targets, g, rows, vocab);
  LAB_CHECK(cudaGetLastError());
}
void log_softmax_backward(float* g, const float* logp, std::size_t rows, int vocab, cudaStream_t stream) {
  log_softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(g, logp, vocab);
  LAB_CHECK(cudaGetLastError());
}

void adamw(float* p, const float* g, float* m, float* v, std::size_t n, const AdamW& hp, int step,
           cudaStream_t stream) {
  const double bc1 = 1 - std::pow(hp.beta1, step), bc2 = 1 - std::pow(hp.beta2, step);
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      p, g, m, v, n, float(1 - hp.lr * hp.weight_decay), float(hp.beta1), float(hp.beta2), float(1 - hp.beta1),
      float(1 - hp.beta2), float(hp.lr / bc1), float(1 / std::sqrt(bc2)), float(hp.eps));
  LAB_CHECK(cudaGetLastError());
}

}  // namespace gpt2::eager
