// The fused GPT-2 step's two policies, stated as concepts that FusedStep (step.cuh) checks with
// static_assert: a member missing, or with another signature, is a compile error that names it.
// Each fused step file supplies a Products policy (the linear layers' matrix products) and may
// supply an Attention policy (the flash attention); the fp32 ones of the first fused step are here,
// and the bf16 flash attention and bf16 products (with dY in bf16) that the later bf16 steps share.
//
// A Products class has
//   static constexpr const char* kPrecision: its arithmetic, as lab::Declared::precision names it;
//   using Operand = float or __nv_bfloat16 (float when absent): the type its products read their
//        operands in. The kernels that make the activations (the LayerNorms' outputs, the merged
//        attention, GELU's output, and its input, the MLP's pre-activation) write them in that
//        type, and the step saves them in it. The weights, in fp32 in the parameters, are
//        rounded into a copy when the type is not float:
//        a block's at the start of its forward, into memory kept with its saved tensors (so, at
//        scale, in the gradients' buffer: no memory of its own), read by its forward and backward;
//   Products(const gpt2::Config&, gpt2::Phase): its scratch, made in the variant's prepare step;
//   void linear(cublasHandle_t, const Operand* X, const Operand* W, float* Y, int M, int N, int K,
//               cudaStream_t): Y (M x N) = X (M x K) W^T, nn.Linear without its bias;
//   using Grad = float or __nv_bfloat16 (float when absent): the type its backward reads dY in. In
//        bf16, the kernels that make each dY (the LayerNorms' backward for the residual stream's
//        gradient, GELU's backward, the QKV rows from the attention's backward, the loss's
//        gradient) write it in bf16 where they make it, and sum its columns into the product's
//        bias gradient in the same pass (from the fp32 values): linear_backward gets db null;
//   void linear_backward(cublasHandle_t, const Grad* dY, const Operand* X, const Operand* W,
//                        float* dX, float* dW, float* db, int M, int N, int K, cudaStream_t):
//        dX = dY W, dW = dY^T X and db = the column sums of dY (none when db is null), all written;
//   optionally head(...) and head_backward(...): the same for the head's products (the
//        vocabulary's), where they differ from linear's;
//   optionally void linear_bias(cublasHandle_t, const Operand* X, const Operand* W, const Operand* b,
//        Operand* Y, int M, int N, int K, cudaStream_t): Y = X W^T + b rounded once into Operand, the
//        bias (in Operand: its copy in the stage's rounded weights) added by the product's epilogue
//        (Operand bf16). The step then has the QKV product and the MLP's first write their rows in
//        bf16, with their biases, where the kernels after them read fp32 and add the bias in fp32
//        (optimized_gpt2_step_fused_bf16_epilogue.cu; its precision says the biases' rounding);
//   optionally void linear_backward_bf16(cublasHandle_t, const Grad* dY, const Operand* X,
//        const Operand* W, Grad* dX, float* dW, int M, int N, int K, cudaStream_t): linear_backward
//        with dX written in bf16 (Grad bf16), no bias gradient. The step then has the MLP's second
//        product write GELU's output gradient in bf16, where GELU's backward reads fp32
//        (optimized_gpt2_step_fused_bf16_dact.cu; its precision says the rounding);
//   optionally void linear_dx_bf16(cublasHandle_t, const Grad* dY, const Operand* W, Grad* dX, int M,
//        int N, int K, cudaStream_t) and void linear_dw(cublasHandle_t, const Grad* dY,
//        const Operand* X, float* dW, int M, int N, int K, cudaStream_t): linear_backward_bf16's two
//        products one at a time (both or neither). The step then runs the MLP's second product's
//        backward as two, with GELU's backward between them making GELU's output for the second
//        (dW's X) from the same erf as its slope, where it made that output in a pass of its own
//        before the product (optimized_gpt2_step_fused_bf16_gelu_once.cu; no rounding changes);
//   optionally void head_bf16(cublasHandle_t, const Operand* X, const Operand* W, Operand* Y, int M,
//        int N, int K, cudaStream_t): the head's product Y = X W^T written in bf16 (Operand and Grad
//        bf16). The step then keeps the logits in bf16, and the loss writes their gradient over them,
//        where it keeps fp32 logits and writes their gradient beside them
//        (optimized_gpt2_step_fused_bf16_logits.cu; its precision says the rounding);
//   optionally static constexpr bool kGeluInFlight = true, with linear_dx_bf16() and linear_dw():
//        GELU's backward between those two products runs gelu_backward_act_in_flight (kernels.cuh:
//        eight columns a thread, four rows' loads in flight) where it ran gelu_backward_act_kernel
//        (optimized_gpt2_step_fused_bf16_gelu_in_flight.cu; no rounding changes);
//   optionally static constexpr bool kKeepLayerNorm = true: the step keeps every LayerNorm's output
//        (in Operand) with the block's saved tensors (the final one's with the head's), and the
//        backward's products read it there, where the backward made it again from the LayerNorm's
//        saved input, mean and rstd (layer_norm_again: kernels.cuh) into one buffer
//        (optimized_gpt2_step_fused_bf16_keep_ln.cu; the same values, so no rounding changes).
//   optionally static constexpr bool kLossInFlight = true, with head_bf16(): the loss and its
//        gradient by cross_entropy_vecs_kernel (kernels.cuh: 16-byte loads, 256 threads a row, several
//        rows an SM) where the vocabulary allows, where cross_entropy_rows_kernel ran
//        (optimized_gpt2_step_fused_bf16_loss_in_flight.cu; the same roundings, the sum in another order).
//   optionally static constexpr bool kRoundAhead = true (Operand bf16): with a backward, the step
//        rounds every stage's weights into their copies on its side stream at the start, each
//        block's products waiting for their own stage's copy, where the lead stream rounded each
//        stage before its products (optimized_gpt2_step_fused_bf16_round_ahead.cu; the same values).
//   optionally static constexpr bool kAdamWRounds = true, with kRoundAhead: in the full step, AdamW
//        writes the updated parameters' bf16 copies that the next step reads, for every stage whose
//        copy lies where the step writes nothing else; the others are rounded ahead
//        (optimized_gpt2_step_fused_bf16_adamw_rounds.cu; the same values).
//   optionally static constexpr bool kLnGradBf16 = true, with linear_dx_bf16() and linear_dw(): the
//        products whose input is a LayerNorm's output (the head's, the MLP's first, the QKV
//        product's) write their input gradient in bf16, as those two products, and the LayerNorm
//        backward reads it so, where linear_backward() wrote it in fp32
//        (optimized_gpt2_step_fused_bf16_ln_grads.cu; its precision says the rounding).
//   optionally static constexpr bool kGeluInProduct = true, with kLnGradBf16: the MLP's second
//        product's input gradient made by the lab's own product (gelu_product.cuh: dx_dgelu), whose
//        epilogue does GELU's backward (dh, act and the first bias's gradient), where
//        linear_dx_bf16() wrote it and gelu_backward_act_in_flight read it
//        (optimized_gpt2_step_fused_bf16_gelu_in_product.cu; the same roundings, the product's
//        sums in another order).
//   optionally static constexpr bool kGeluForwardInProduct = true, with kLnGradBf16: the MLP's
//        first product with its bias and GELU by the same product (bias_gelu: h and act from its
//        epilogue), where linear_bias() wrote h and gelu_kernel made act from it
//        (optimized_gpt2_step_fused_bf16_gelu_forward_in_product.cu; the same roundings).
// Everything it launches goes on the stream it is given (cuBLAS: the handle's stream), so that the
// step is captured as one CUDA graph.
//
// The attention is a second such class, FlashFp32 below unless the file gives another
// (optimized_gpt2_step_fused_tc_attention.cu: the same algorithm on the tensor cores). It has
//   static constexpr const char* kPrecision: its products' arithmetic ("fp32", "3xtf32", "bf16");
//   using Operand (float when absent): the type of the Q, K, V and dO heads it reads, which the
//        step lays out (and saves) in that type;
//   a constructor from (const gpt2::Config&, gpt2::Phase): its scratch, if it needs any;
//   optionally static std::string supports(const lab::DeviceFacts&): why the device cannot run it
//        ("" when it can), for the step's supports();
//   void forward(q, k, v, o, lse, bh, seq, d, causal, scale, stream) and
//   void backward(q, k, v, dout, lse, delta, dq, dk, dv, bh, seq, d, causal, scale, stream):
//        attention/kernels/flash_fp32.cuh's forward and backward (o, lse, dq, dk, dv in fp32; dq added to: zeroed
//        before);
//   optionally static constexpr bool kWritesRows = true, with
//   void forward_rows(q, k, v, att, lse, batch, heads, seq, d, hd, causal, scale, stream): O in bf16
//        straight into the merged rows the projection reads (att: B T x heads hd), and
//   void backward_rows(q, k, v, dout, lse, delta, dq, dqkv, db, batch, heads, seq, d, hd, causal, scale,
//        stream): dq by head in fp32 (added to, as backward's), dK and dV in bf16 straight into the QKV
//        product's dY rows (dqkv: B T x 3 heads hd, its columns from heads hd on), their column sums
//        added to db (the product's bias gradient, from db + heads hd on; zeroed before). d: the
//        flash width, hd the model's head size (d with its padding);
//   optionally static constexpr bool kReadsQkvRows = true (with kWritesRows), with
//   static bool qkv_rows(const gpt2::Config&): whether it reads Q, K and V at this shape straight
//        from the QKV product's rows (bf16, bias added: B T x 3 heads hd), not by head; and
//   void forward_qkv_rows(qkv, att, lse, batch, heads, seq, hd, causal, scale, stream) and
//   void backward_qkv_rows(qkv, dout, lse, delta, dq, dqkv, db, batch, heads, seq, hd, causal, scale,
//        stream): forward_rows and backward_rows with q, k and v those rows
//        (optimized_gpt2_step_fused_bf16_qkv_rows.cu; the same values, no copy by head).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "attention/kernels/flash_bf16.cuh"
#include "attention/kernels/flash_fp32.cuh"
#include "gpt2/eager/gpt2_eager.cuh"
#include "gpt2/gpt2.cuh"

namespace {

// The type a Products or Attention class reads its activations in: its Operand, float when absent.
template <class T>
struct operand_of {
  using type = float;
};
template <class T>
  requires requires { typename T::Operand; }
struct operand_of<T> {
  using type = typename T::Operand;
};

// The type a Products class's backward reads dY in: its Grad, float when absent.
template <class T>
struct grad_of {
  using type = float;
};
template <class T>
  requires requires { typename T::Grad; }
struct grad_of<T> {
  using type = typename T::Grad;
};

namespace policy {

template <class T>
concept Named = requires { { T::kPrecision } -> std::convertible_to<const char*>; };

template <class P, class Op = typename operand_of<P>::type, class G = typename grad_of<P>::type>
concept Products = Named<P> && std::constructible_from<P, const gpt2::Config&, gpt2::Phase> &&
                   requires(P& p, cublasHandle_t h, const Op* x, const G* dy, float* y, int m, cudaStream_t s) {
                     p.linear(h, x, x, y, m, m, m, s);
                     p.linear_backward(h, dy, x, x, y, y, y, m, m, m, s);
                   };
// A Products class that names head() or head_backward() gives them linear()'s signatures.
template <class P, class Op = typename operand_of<P>::type>
concept HeadProducts = requires(P& p, cublasHandle_t h, const Op* x, float* y, int m, cudaStream_t s) {
  p.head(h, x, x, y, m, m, m, s);
};
template <class P, class Op = typename operand_of<P>::type, class G = typename grad_of<P>::type>
concept HeadBackwardProducts = requires(P& p, cublasHandle_t h, const Op* x, const G* dy, float* y, int m,
                                        cudaStream_t s) { p.head_backward(h, dy, x, x, y, y, y, m, m, m, s); };
template <class P>
concept NamesHead = requires { &P::head; };
// A Products class that names linear_bias() gives it the signature above, in bf16.
template <class P>
concept NamesLinearBias = requires { &P::linear_bias; };
// A Products class that names linear_backward_bf16() gives it the signature above, in bf16.
template <class P>
concept NamesBackwardBf16 = requires { &P::linear_backward_bf16; };
template <class P, class Op = typename operand_of<P>::type, class G = typename grad_of<P>::type>
concept BackwardBf16Products = std::is_same_v<G, __nv_bfloat16> &&
                               requires(P& p, cublasHandle_t h, const Op* x, const G* dy, G* dx, float* w, int m,
                                        cudaStream_t s) { p.linear_backward_bf16(h, dy, x, x, dx, w, m, m, m, s); };
template <class P, class Op = typename operand_of<P>::type>
concept LinearBiasProducts = std::is_same_v<Op, __nv_bfloat16> &&
                             requires(P& p, cublasHandle_t h, const Op* x, Op* y, int m, cudaStream_t s) {
                               p.linear_bias(h, x, x, x, y, m, m, m, s);
                             };
// A Products class that names linear_dx_bf16() or linear_dw() gives both the signatures above, in bf16.
template <class P>
concept NamesSplitBackward = requires { &P::linear_dx_bf16; } || requires { &P::linear_dw; };
template <class P, class Op = typename operand_of<P>::type, class G = typename grad_of<P>::type>
concept SplitBackwardProducts = std::is_same_v<G, __nv_bfloat16> &&
                                requires(P& p, cublasHandle_t h, const Op* x, const G* dy, G* dx, float* w, int m,
                                         cudaStream_t s) {
                                  p.linear_dx_bf16(h, dy, x, dx, m, m, m, s);
                                  p.linear_dw(h, dy, x, w, m, m, m, s);
                                };
// A Products class that names kGeluInFlight (true) splits the MLP's second product's backward too.
template <class P>
concept NamesGeluInFlight = requires { requires P::kGeluInFlight; };
// A Products class that names kKeepLayerNorm (true) has the step keep the LayerNorms' outputs.
template <class P>
concept NamesKeepLayerNorm = requires { requires P::kKeepLayerNorm; };
// A Products class that names kLossInFlight (true) has the step run the loss kernel in flight.
template <class P>
concept NamesLossInFlight = requires { requires P::kLossInFlight; };
// A Products class that names kRoundAhead (true) has the step round the weights ahead, on the side stream.
template <class P>
concept NamesRoundAhead = requires { requires P::kRoundAhead; };
// A Products class that names kAdamWRounds (true) has AdamW write the next step's weights' copies.
template <class P>
concept NamesAdamWRounds = requires { requires P::kAdamWRounds; };
// A Products class that names kLnGradBf16 (true), with linear_dx_bf16() and linear_dw(), has the
// products before the LayerNorms' backward write their input gradients in bf16.
template <class P>
concept NamesLnGradBf16 = requires { requires P::kLnGradBf16; };
// A Products class that names kGeluInProduct (true) has GELU's backward done in the epilogue of the
// product that makes its input gradient (dx_dgelu).
template <class P>
concept NamesGeluInProduct = requires { requires P::kGeluInProduct; };
// A Products class that names kGeluForwardInProduct (true) has the MLP's first product add its bias
// and make GELU in its epilogue (bias_gelu).
template <class P>
concept NamesGeluForwardInProduct = requires { requires P::kGeluForwardInProduct; };
template <class P>
concept NamesHeadBackward = requires { &P::head_backward; };
// A Products class with a library that needs a workspace of its own (cuBLASLt) names use_workspace(),
// and the step lends it the workspace it gives cuBLAS.
template <class P>
concept NamesWorkspace = requires(P& p, std::uint8_t* at, std::size_t bytes) { p.use_workspace(at, bytes); };
// A Products class that names head_bf16() gives it the signature above, in bf16.
template <class P>
concept NamesHeadBf16 = requires { &P::head_bf16; };
template <class P, class Op = typename operand_of<P>::type, class G = typename grad_of<P>::type>
concept HeadBf16Products = std::is_same_v<Op, __nv_bfloat16> && std::is_same_v<G, __nv_bfloat16> &&
                           requires(P& p, cublasHandle_t h, const Op* x, Op* y, int m, cudaStream_t s) {
                             p.head_bf16(h, x, x, y, m, m, m, s);
                           };

template <class A, class Op = typename operand_of<A>::type>
concept Attention = Named<A> && std::constructible_from<A, const gpt2::Config&, gpt2::Phase> &&
                    requires(A& a, const Op* q, float* o, float* lse, const float* clse, const float* delta,
                             float* dq, int n, bool causal, float scale, cudaStream_t s) {
                      a.forward(q, q, q, o, lse, n, n, n, causal, scale, s);
                      a.backward(q, q, q, q, clse, delta, dq, dq, dq, n, n, n, causal, scale, s);
                    };

template <class A>
concept AttentionSupports = requires(const lab::DeviceFacts& dev) {
  { A::supports(dev) } -> std::convertible_to<std::string>;
};

// An Attention class that writes its outputs where the products read them (kWritesRows; Operand
// and the products' Operand and Grad all bf16): the step's layout passes for O, dK and dV are then
// its own.
template <class A>
concept NamesRows = requires { requires A::kWritesRows; };
template <class A>
concept WritesRows = NamesRows<A> &&
                     requires(A& a, const __nv_bfloat16* q, __nv_bfloat16* rows, float* f, const float* cf, int n,
                              bool causal, float scale, cudaStream_t s) {
                       a.forward_rows(q, q, q, rows, f, n, n, n, n, n, causal, scale, s);
                       a.backward_rows(q, q, q, q, cf, cf, f, rows, f, n, n, n, n, n, causal, scale, s);
                     };

// An Attention class that reads Q, K and V from the QKV product's rows where qkv_rows() says
// (kReadsQkvRows, with kWritesRows): the step then lays them out by head only elsewhere.
template <class A>
concept NamesQkvRows = requires { requires A::kReadsQkvRows; };
template <class A>
concept ReadsQkvRows = NamesQkvRows<A> && WritesRows<A> &&
                       requires(A& a, const gpt2::Config& c, const __nv_bfloat16* q, __nv_bfloat16* rows, float* f,
                                const float* cf, int n, bool causal, float scale, cudaStream_t s) {
                         { A::qkv_rows(c) } -> std::same_as<bool>;
                         a.forward_qkv_rows(q, rows, f, n, n, n, n, causal, scale, s);
                         a.backward_qkv_rows(q, q, cf, cf, f, rows, f, n, n, n, n, causal, scale, s);
                       };

}  // namespace policy

// The products as the vanilla step runs them: cuBLAS SGEMM (fp32 FMA on the SIMT units).
struct Sgemm {
  static constexpr const char* kPrecision = "fp32";
  Sgemm(const gpt2::Config&, gpt2::Phase) {}
  void linear(cublasHandle_t blas, const float* X, const float* W, float* Y, int M, int N, int K, cudaStream_t) {
    gpt2::eager::linear(blas, X, W, Y, M, N, K);
  }
  void linear_backward(cublasHandle_t blas, const float* dY, const float* X, const float* W, float* dX, float* dW,
                       float* db, int M, int N, int K, cudaStream_t stream) {
    gpt2::eager::linear_backward(blas, dY, X, W, dX, dW, db, M, N, K, stream);
  }
};

// The chapter's fp32 flash attention on the SIMT units (flash_fp32.cuh).
struct FlashFp32 {
  static constexpr const char* kPrecision = "fp32";
  FlashFp32(const gpt2::Config&, gpt2::Phase) {}
  static constexpr auto forward = flash::forward;
  static constexpr auto backward = flash::backward;
};

// The chapter's bf16 flash attention (optimized_attention_fused_tc and
// optimized_attention_backward_fused_tc), over Q, K, V and dO that the step lays out in bf16. The
// backward's delta (rowsum dO o O) is the step's: from the fp32 dO and the saved bf16 O.
struct FlashBf16 {
  static constexpr const char* kPrecision = "bf16";
  using Operand = __nv_bfloat16;
  FlashBf16(const gpt2::Config&, gpt2::Phase) {}
  static constexpr auto forward = flashbf16::forward<Operand>;
  static constexpr auto backward = flashbf16::backward<Operand>;
};

// Every linear layer's products in bf16, the head's included, with dY made in bf16 where it is made
// (Grad; optimized_gpt2_step_fused_bf16_grads.cu tells the lesson, and the later bf16 steps keep
// it): X, W and dY arrive in bf16 (the step's kernels wrote X and dY so; W is the block's copy the
// step rounded); one cuBLAS GEMM with bf16 inputs, fp32 output and fp32 accumulation a product.
// No scratch, no pass of its own.
struct Bf16GradGemm {
  static constexpr const char* kPrecision = "bf16";
  using Operand = __nv_bfloat16;
  using Grad = __nv_bfloat16;
  Bf16GradGemm(const gpt2::Config&, gpt2::Phase) {}

  void linear(cublasHandle_t blas, const __nv_bfloat16* X, const __nv_bfloat16* W, float* Y, int M, int N, int K,
              cudaStream_t) {
    gpt2::eager::linear(blas, X, W, Y, M, N, K);
  }
  // dX = dY W and dW = dY^T X; db was summed where dY was made (the step passes null).
  void linear_backward(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* X, const __nv_bfloat16* W,
                       float* dX, float* dW, float* db, int M, int N, int K, cudaStream_t) {
    if (db) throw lab::Error("Bf16GradGemm: the bias gradient is summed where dY is made");
    gpt2::eager::linear_backward(blas, dY, X, W, dX, dW, M, N, K);
  }
};

static_assert(policy::Products<Sgemm> && policy::Attention<FlashFp32> && policy::Attention<FlashBf16> &&
              policy::Products<Bf16GradGemm>);

}  // namespace
