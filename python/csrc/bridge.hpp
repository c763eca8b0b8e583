// The lab's side of the PyTorch bridge: plain C++ over device pointers, no PyTorch types, so that
// the kernels' files compile with nvcc alone and ops.cpp (PyTorch's side) with the host compiler.
//
// The chapter 3 operators run a registered variant, named by its program ("optimized_layernorm"),
// exactly as its program runs it: the topic's Problem over the caller's memory
// (Problem(shape, lab::Borrowed{}), its buffers borrowed), the variant's prepare step once per
// shape and device (its scratch kept for the next call of that shape), then its run on the caller's
// stream. The time a call takes on the GPU is the time the program measures. The attention
// operators call the fused kernels' launchers (flash_fp32.cuh, flash_3xtf32.cuh, flash_bf16.cuh),
// the ones the chapter's fused variants and the GPT-2 step run, and AdamW the fused GPT-2 step's
// flat AdamW (flat_adamw.cuh).
//
// Every function throws std::invalid_argument for a variant or shape the lab does not run (the
// message names it and why) and lab::Error for a CUDA error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace bridge {

// The variants compiled into the extension, of one topic ("layernorm"), in the registry's order.
std::vector<std::string> variants_of(const std::string& topic);
// Forgets every prepared variant state (frees their scratch).
void clear_cache();
// How many prepared states are held.
std::size_t cached_states();
// "" when the variant (a program name) runs the shape on the current device, otherwise why not.
std::string supports(const std::string& program, const std::vector<std::int64_t>& dims);

// Chapter 3 (see each topic's header for the arithmetic and layouts).
void layernorm_forward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                       const float* gamma, const float* beta, float* y, float* mean, float* rstd, cudaStream_t s);
void layernorm_backward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                        const float* gamma, const float* dy, const float* mean, const float* rstd, float* dx,
                        float* dgamma, float* dbeta, cudaStream_t s);
// topic: "gelu" or "swish".
void activation_forward(const std::string& topic, const std::string& variant, std::int64_t n, const float* x, float* y,
                        cudaStream_t s);
void activation_backward(const std::string& topic, const std::string& variant, std::int64_t n, const float* x,
                         const float* dy, float* dx, cudaStream_t s);
// loss: the mean over the K rows whose label is not ignore_index (K written to count, a float as
// PyTorch's total_weight; NaN when K = 0); lse: each row's log-sum-exp. A row labelled ignore_index
// has no loss and a zero row of gradient. Any other label outside [0, classes) makes its row's loss
// (and so the mean) NaN, and its row of the gradient NaN: never a fault. The backward writes
// dloss (softmax - onehot) / count for every counted row.
void cross_entropy_forward(const std::string& variant, std::int64_t rows, std::int64_t classes, const float* logits,
                           const std::int32_t* labels, std::int32_t ignore_index, float* loss, float* count,
                           float* lse, cudaStream_t s);
void cross_entropy_backward(const std::string& variant, std::int64_t rows, std::int64_t classes, const float* logits,
                            const std::int32_t* labels, std::int32_t ignore_index, const float* lse, const float* dloss,
                            const float* count, float* dlogits, cudaStream_t s);

// The weighted sum y = x w (x rows x dim row-major, w and y vectors) and its backward:
// dx = dy w^T, dw = x^T dy.
void weighted_sum_forward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                          const float* w, float* y, cudaStream_t s);
void weighted_sum_backward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                           const float* w, const float* dy, float* dx, float* dw, cudaStream_t s);

// Fused attention, [batch][heads][seq][d] contiguous, scale 1/sqrt(d). precision: "fp32" (SIMT),
// "3xtf32" (fp32 inputs on the tensor cores) or "bf16" (q, k, v, dout bf16). O, lse, dQ, dK, dV are
// fp32. The backward writes delta (bh x seq scratch) and zeroes dq itself.
// "" when the shape is one the kernels run, otherwise why not.
std::string attention_validate(std::int64_t batch, std::int64_t heads, std::int64_t seq, std::int64_t d);
void attention_forward(const std::string& precision, int batch, int heads, int seq, int d, bool causal, const void* q,
                       const void* k, const void* v, float* o, float* lse, cudaStream_t s);
void attention_backward(const std::string& precision, int batch, int heads, int seq, int d, bool causal,
                        const void* q, const void* k, const void* v, const void* dout, const float* dout_fp32,
                        const float* o, const float* lse, float* delta, float* dq, float* dk, float* dv,
                        cudaStream_t s);

// AdamW (torch.optim.AdamW's arithmetic; flat_adamw.cuh) over n parameters, in place: p, m, v updated
// from g at step `step` (>= 1), in one launch. The four arrays share their address modulo 16 bytes.
// "" when the hyperparameters are ones AdamW takes, otherwise why not.
std::string adamw_validate(std::int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay);
void adamw_step(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step, double lr,
                double beta1, double beta2, double eps, double weight_decay, cudaStream_t s);

}  // namespace bridge
