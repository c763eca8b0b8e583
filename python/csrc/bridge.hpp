// The lab's side of the PyTorch bridge: plain C++ over device pointers, no PyTorch types, so that
// the kernels' files compile with nvcc alone and ops.cpp (PyTorch's side) with the host compiler.
//
// The chapter 3 operators run a registered variant, named by its program ("optimized_layernorm"),
// exactly as its program runs it: the topic's Problem over the caller's memory
// (Problem(shape, lab::Borrowed{}), its buffers borrowed), the variant's prepare step once per
// shape and device (its scratch kept for the next call of that shape), then its run on the caller's
// stream. The time a call takes on the GPU is the time the program measures. The attention
// operators call the fused kernels' launchers (flash_fp32.cuh, flash_3xtf32.cuh, flash_bf16.cuh,
// and on sm_90 the Hopper forward and backward, bridge_attention_hopper.cu), the ones the chapter's
// fused variants and the GPT-2 steps run, and AdamW the fused GPT-2 step's flat AdamW
// (flat_adamw.cuh).
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

// The storage type of an operator's tensors (the arithmetic is fp32 in all).
enum class Storage { f32, bf16, fp16 };
// A storage twin's suffix: "" for f32, "_bf16", "_fp16" (cmake/Lab.cmake: a variant file with a line
// "// lab-storage: bf16 fp16" is also the programs <name>_bf16 and <name>_fp16).
const char* suffix(Storage storage);

// Chapter 3 (see each topic's header for the arithmetic and layouts).
// variant: a program of the fp32 topic ("optimized_layernorm"). On bf16 or fp16 storage its
// storage twin runs, the program of the same name + "_bf16" or "_fp16" (of topic layernorm_bf16 or
// layernorm_fp16): x, gamma, beta and y are __nv_bfloat16 or __half there, mean and rstd float in all.
void layernorm_forward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t dim,
                       const void* x, const void* gamma, const void* beta, void* y, float* mean, float* rstd,
                       cudaStream_t s);
// The backward on the same storages (x, gamma, dy, dx, dgamma and dbeta float, __nv_bfloat16 or
// __half; mean and rstd float): on 16 bits the program of the variant's name + "_bf16" or "_fp16".
void layernorm_backward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t dim,
                        const void* x, const void* gamma, const void* dy, const float* mean, const float* rstd,
                        void* dx, void* dgamma, void* dbeta, cudaStream_t s);
// topic: "gelu" or "swish"; variant: a program of the fp32 topic ("optimized_gelu"). On bf16 or
// fp16 storage the program of the same name + "_bf16" or "_fp16" runs (optimized_gelu_bf16, of topic
// gelu_bf16; optimized_gelu_fp16, its fp16 twin); x, dy and the output are float, __nv_bfloat16 or
// __half as `storage` says.
void activation_forward(const std::string& topic, const std::string& variant, Storage storage, std::int64_t n,
                        const void* x, void* y, cudaStream_t s);
void activation_backward(const std::string& topic, const std::string& variant, Storage storage, std::int64_t n,
                         const void* x, const void* dy, void* dx, cudaStream_t s);
// loss: the mean over the K rows whose label is not ignore_index (K written to count, a float as
// PyTorch's total_weight; NaN when K = 0); lse: each row's log-sum-exp. A row labelled ignore_index
// has no loss and a zero row of gradient. Any other label outside [0, classes) makes its row's loss
// (and so the mean) NaN, and its row of the gradient NaN: never a fault. The backward writes
// dloss (softmax - onehot) / count for every counted row.
// On bf16 or fp16 storage (logits and dlogits __nv_bfloat16 or __half) the programs of the
// variant's name + "_bf16" or "_fp16"; loss, count, lse and dloss are float in all.
void cross_entropy_forward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t classes,
                           const void* logits, const std::int32_t* labels, std::int32_t ignore_index, float* loss,
                           float* count, float* lse, cudaStream_t s);
void cross_entropy_backward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t classes,
                            const void* logits, const std::int32_t* labels, std::int32_t ignore_index, const float* lse,
                            const float* dloss, const float* count, void* dlogits, cudaStream_t s);

// The weighted sum y = x w (x rows x dim row-major, w and y vectors) and its backward:
// dx = dy w^T, dw = x^T dy.
void weighted_sum_forward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                          const float* w, float* y, cudaStream_t s);
void weighted_sum_backward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                           const float* w, const float* dy, float* dx, float* dw, cudaStream_t s);

// Fused attention, softmax(scale q k^T) v (SDPA's scale, 1/sqrt(d) unless the caller says otherwise;
// a caller that pads the head size passes the real one's). q, k, v (and dO) [batch][heads][seq][d]
// contiguous.
// precision: "fp32" (SIMT), "3xtf32" (fp32 inputs on the tensor cores), "bf16" or "fp16" (q, k, v,
// dO in that type).
// "" when the shape is one the kernels run, otherwise why not: d 16, 32, 64 or 128, and 256 for the
// 16-bit kernels (sixteen_bits: bf16 or fp16).
std::string attention_validate(std::int64_t batch, std::int64_t heads, std::int64_t seq, std::int64_t d,
                               bool sixteen_bits);
// The mma.sync and SIMT kernels: O and lse fp32, by head.
void attention_forward(const std::string& precision, int batch, int heads, int seq, int d, bool causal, const void* q,
                       const void* k, const void* v, float* o, float* lse, float scale, cudaStream_t s);
// fp32 and 3xtf32: delta (bh x seq scratch) from dO and O, dq zeroed, then the fused backward;
// dQ, dK, dV fp32 by head.
void attention_backward(const std::string& precision, int batch, int heads, int seq, int d, bool causal,
                        const float* q, const float* k, const float* v, const float* dout, const float* o,
                        const float* lse, float* delta, float* dq, float* dk, float* dv, float scale,
                        cudaStream_t s);
// An element's offset in a [batch][heads][seq][d] tensor of any strides: b b_stride + h h_stride +
// t t_stride + c (the last dimension's stride 1).
struct BhtStrides {
  std::int64_t b = 0, h = 0, t = 0;
};
// 16 bits (storage bf16 or fp16; f32 throws std::invalid_argument): delta = rowsum(dO o O) from
// 16-bit dO and O of any strides (multiples of 8 elements, the data 16-byte aligned), the
// backward's first step.
void attention_delta16(Storage storage, int batch, int heads, int seq, int d, const void* dout,
                       BhtStrides dout_strides, const void* o, BhtStrides o_strides, float* delta, cudaStream_t s);
// fp32 rows by head (dense [batch][heads][seq][d]) rounded into 16-bit rows of any strides (multiples
// of 8 elements, 16-byte aligned): dQ after its fp32 sums, and the mma.sync kernels' outputs.
void attention_rows_to16(Storage storage, int batch, int heads, int seq, int d, const float* src, void* dst,
                         BhtStrides dst_strides, cudaStream_t s);
// 16 bits on mma.sync (flash_bf16.cuh, its bf16 or fp16 instruction), delta given: dq zeroed, then
// dQ, dK, dV fp32 by head.
void attention_backward16(Storage storage, int batch, int heads, int seq, int d, bool causal, const void* q,
                          const void* k, const void* v, const void* dout, const float* lse, const float* delta,
                          float* dq, float* dk, float* dv, float scale, cudaStream_t s);
// bf16 and fp16 (storage) on the Hopper kernels (bridge_attention_hopper.cu). "" when they run head
// size d on the current device (an sm_90 GPU, and the file built for sm_90a), otherwise why not.
// Their outputs lie as scaled_dot_product_attention's: O, and in the backward dK and dV, in 16-bit rows,
// [batch][seq][heads][d] (the (batch, heads, seq, d) tensor's transpose of a dense (batch, seq,
// heads, d) one); lse fp32 [batch][heads][seq]; dQ fp32 by head (zeroed here, then added to).
// q, k, v, dO: 16-byte aligned (the TMA's). db: 2 heads d floats of scratch. qkv_ld 0: q, k and v
// dense by head ([batch][heads][seq][d]); otherwise each is rows of qkv_ld elements (a multiple of
// 8), token b seq + t's row with the heads side by side, head h's d columns at h d: the (batch,
// heads, seq, d) transpose of a (batch, seq, heads, d) layout, as a GPT-2 block makes q, k and v
// (views of one (batch, seq, 3 heads, d) buffer, qkv_ld = 3 heads d). The kernels read those rows
// through tensor maps over them (flashtma::rows_maps, chapter 4's step 18), no copy by head.
std::string hopper_attention_supports(std::int64_t d);
// How the 16-bit Hopper forward runs (batch, heads, seq, d, causal) on the current device: "grid" (a
// block a query tile, step 8), "persistent N" (N persistent blocks, step 10; their lists made now if
// new), or "" where it does not run the Hopper kernels.
std::string hopper_attention_forward_blocks(int batch, int heads, int seq, int d, bool causal);
// Which of chapter 4's backward kernels the 16-bit Hopper backward runs (batch, heads, seq, d) on the
// current device: "step 11, 2 consumers" (d = 128), "step 12, 2 consumers" (d = 64), or "" where it
// does not run the Hopper kernels. The shape's other sizes choose nothing today; they are asked for so
// that a choice by the grid's waves (as the package made until session 95) needs no change of callers.
std::string hopper_attention_backward_kernel(int batch, int heads, int seq, int d);
// Whether that kernel is step 11's persistent one, which takes the counter (two words, zero) that
// hopper_attention_backward's caller passes; the others take none (null).
bool hopper_attention_backward_counts(int batch, int heads, int seq, int d);
void hopper_attention_forward(Storage storage, int batch, int heads, int seq, int d, bool causal, const void* q,
                              const void* k, const void* v, std::size_t qkv_ld, void* o_rows, float* lse, float scale,
                              cudaStream_t s);
void hopper_attention_backward(Storage storage, int batch, int heads, int seq, int d, bool causal, const void* q,
                               const void* k, const void* v, std::size_t qkv_ld, const void* dout, const float* lse,
                               const float* delta, float* dq, void* dk_rows, void* dv_rows, float* db,
                               unsigned* counter, float scale, cudaStream_t s);

// AdamW (torch.optim.AdamW's arithmetic; flat_adamw.cuh) over n parameters, in place: p, m, v updated
// from g at step `step` (>= 1), in one launch. The four arrays share their address modulo 16 bytes.
// "" when the hyperparameters are ones AdamW takes, otherwise why not.
std::string adamw_validate(std::int64_t step, double lr, double beta1, double beta2, double eps, double weight_decay);
void adamw_step(float* p, const float* g, float* m, float* v, std::int64_t n, std::int64_t step, double lr,
                double beta1, double beta2, double eps, double weight_decay, cudaStream_t s);
// The same step with each tensor's gradient where autograd left it (FlatAdamW after zero_grad(
// set_to_none=True): backward hands each parameter a fresh gradient, with nothing added into a flat
// one). p, m, v: flat, n elements, each 16-byte aligned, tensor t at the offset of the tensors before it
// each rounded up to 4 elements (so that every tensor starts on a 16-byte boundary); g[t]: tensor t's
// sizes[t] gradient elements, 16-byte aligned. Empty when the layout is one the kernel takes, else why not.
std::string adamw_list_validate(const float* p, const float* m, const float* v, std::int64_t n,
                                const std::vector<const float*>& g, const std::vector<std::int64_t>& sizes);
void adamw_list_step(float* p, float* m, float* v, std::int64_t n, const std::vector<const float*>& g,
                     const std::vector<std::int64_t>& sizes, std::int64_t step, double lr, double beta1, double beta2,
                     double eps, double weight_decay, cudaStream_t s);

}  // namespace bridge
