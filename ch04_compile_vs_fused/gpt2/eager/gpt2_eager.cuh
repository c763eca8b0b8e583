// The GPT-2 model's operators as an eager framework's library holds them: one kernel (or one
// cuBLAS call) per operation, each reading its inputs from device memory and writing its output
// back, as PyTorch's eager mode runs nn.Linear, F.layer_norm, F.gelu, the residual `+`, the
// embeddings and F.cross_entropy (log_softmax then nll_loss). The attention's operators are the
// chapter's own (attention.cuh: attn::gemm_nt, scale, causal_mask, softmax_rows, gemm_nn and their
// backward). baseline_gpt2_step.cu calls these, one line an operation, as its lesson; the compiled
// variant keeps the products and replaces the element-wise and row operations with generated ones.
//
// Conventions: row-major tensors, rows = B x T positions; nn.Linear's weight is out x in. Every
// function launches on `stream` (cuBLAS: on the handle's stream, set by use_stream) and writes its
// output completely; gradients of parameters are written (zeroed first where the kernel adds).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpt2/gpt2_model.hpp"

namespace gpt2::eager {

// Puts the handle on the stream in cuBLAS's default math: fp32 products (no TF32), as PyTorch with
// torch.backends.cuda.matmul.allow_tf32 = False.
void use_stream(cublasHandle_t blas, cudaStream_t stream);

// nn.Linear without its bias (the bias is add_bias, eager's separate kernel): Y (M x N) = X (M x K) W^T.
void linear(cublasHandle_t blas, const float* X, const float* W, float* Y, int M, int N, int K);
// Its backward: dX (M x K) = dY W, and dW (N x K) = dY^T X (written, not accumulated).
void linear_backward_input(cublasHandle_t blas, const float* dY, const float* W, float* dX, int M, int N, int K);
void linear_backward_weight(cublasHandle_t blas, const float* dY, const float* X, float* dW, int M, int N, int K);
// nn.Linear's whole backward: dX, dW, and db (bias_backward; none when db is null).
void linear_backward(cublasHandle_t blas, const float* dY, const float* X, const float* W, float* dX, float* dW,
                     float* db, int M, int N, int K, cudaStream_t stream);
// y[i][j] += b[j] (in place), and its backward db[j] = sum_i dy[i][j].
void add_bias(float* y, const float* b, std::size_t rows, int cols, cudaStream_t stream);
void bias_backward(const float* dy, float* db, std::size_t rows, int cols, cudaStream_t stream);

// out[r] = wte[tokens[r]] (the token embedding), then out[b][t] += wpe[t] (the positions).
void embedding(const float* wte, const std::int32_t* tokens, float* out, std::size_t rows, int d, cudaStream_t stream);
void add_positions(float* x, const float* wpe, int batch, int context, int d, cudaStream_t stream);
// Their backward: dwte[v] = sum of dx over the positions holding token v (the whole V x d table
// written: zero where v does not occur), dwpe[t] = sum over the batch of dx[b][t] (all kPositions
// rows written: zero from `context` on).
void embedding_backward(const float* dx, const std::int32_t* tokens, float* dwte, std::size_t rows, int vocab, int d,
                        cudaStream_t stream);
void positions_backward(const float* dx, float* dwpe, int batch, int context, int d, cudaStream_t stream);

// F.layer_norm over rows of d (eps kLayerNormEps): y = (x - mean) rstd w + b, keeping mean and rstd
// for the backward. Its backward: dx (written) from dy, and dw, db (written: column sums).
void layer_norm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, std::size_t rows,
                int d, cudaStream_t stream);
void layer_norm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                         float* dx, float* dw, float* db, std::size_t rows, int d, cudaStream_t stream);

// F.gelu (exact, erf form) and its backward dx = dy gelu'(x).
void gelu(const float* x, float* y, std::size_t n, cudaStream_t stream);
void gelu_backward(const float* dy, const float* x, float* dx, std::size_t n, cudaStream_t stream);

// out = a + b (the residual; autograd's accumulation of two gradients). out may be a or b.
void add(const float* a, const float* b, float* out, std::size_t n, cudaStream_t stream);

// The heads' layout change: (B, T, [ld columns of which h x hd from src]) <-> (B, h, T, hd)
// contiguous, as .view(B, T, h, hd).transpose(1, 2).contiguous() and back. `rows` holds the heads
// at columns [0, h hd) of rows `ld` floats apart (pass qkv + d for K, and ld = 3d).
void split_heads(const float* rows, int ld, float* heads, int batch, int context, int h, int hd, cudaStream_t stream);
void merge_heads(const float* heads, float* rows, int ld, int batch, int context, int h, int hd, cudaStream_t stream);

// F.cross_entropy as eager runs it: log_softmax over rows of V into logp (materialized, rows x V),
// then nll_loss, loss[0] = -mean_r logp[r][targets[r]].
void log_softmax(const float* logits, float* logp, std::size_t rows, int vocab, cudaStream_t stream);
void nll_loss(const float* logp, const std::int32_t* targets, float* loss, std::size_t rows, int vocab,
              cudaStream_t stream);
// Their backward: g = dloss/dlogp (-1/rows at each target, zero elsewhere: written), then in place
// g <- g - exp(logp) rowsum(g), dloss/dlogits.
void nll_loss_backward(const std::int32_t* targets, float* g, std::size_t rows, int vocab, cudaStream_t stream);
void log_softmax_backward(float* g, const float* logp, std::size_t rows, int vocab, cudaStream_t stream);

// One AdamW step over n parameters (one tensor, or the whole flat buffer), in torch.optim.AdamW's
// order of operations at step t (>= 1): p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void adamw(float* p, const float* g, float* m, float* v, std::size_t n, const AdamW& hp, int step,
           cudaStream_t stream);

// ---- torch.autocast(bfloat16)'s operators, for the mixed-precision steps ----------------------
// Autocast runs nn.Linear (and matmul) with bf16 operands, casting each fp32 input to bf16 by a
// pass of its own, and runs LayerNorm, softmax and the loss in fp32. These products keep their
// output in fp32 where autocast writes bf16: the rounding the check models (gpt2::ModelOptions'
// "bf16") is the operands', and a bf16 output would add a third.

// y = x rounded to bf16 (to nearest, ties to even): autocast's cast, one element-wise pass.
void to_bf16(const float* x, __nv_bfloat16* y, std::size_t n, cudaStream_t stream);
// nn.Linear's product with bf16 operands on the tensor cores, fp32 accumulation and output:
// Y (M x N) = X (M x K) W^T. Its backward from a bf16 dY: dX (M x K) = dY W and dW (N x K) = dY^T X,
// both written in fp32 (the bias's gradient is bias_backward of the fp32 dY).
void linear(cublasHandle_t blas, const __nv_bfloat16* X, const __nv_bfloat16* W, float* Y, int M, int N, int K);
void linear_backward(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* X, const __nv_bfloat16* W,
                     float* dX, float* dW, int M, int N, int K);
// F.gelu as autocast runs it on a bf16 input: computed in fp32, written in bf16; its backward
// takes the derivative at the bf16 input, dx = dy gelu'(x) in fp32.
void gelu(const __nv_bfloat16* x, __nv_bfloat16* y, std::size_t n, cudaStream_t stream);
void gelu_backward(const float* dy, const __nv_bfloat16* x, float* dx, std::size_t n, cudaStream_t stream);

}  // namespace gpt2::eager
