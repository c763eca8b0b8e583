// The products policies that optimized_gpt2_step_fused_bf16_epilogue.cu introduces and the later bf16
// steps build on (Bf16BiasEpilogue): the previous steps' products (Bf16GradGemm, policies.cuh) with
// linear_bias, the QKV product and the MLP's first run through cuBLASLt with its BIAS epilogue and
// writing bf16 (LtBias). That step's file tells the lesson; optimized_gpt2_step_fused_bf16_dact.cu's
// adds linear_backward_bf16 (Bf16Dact), optimized_gpt2_step_fused_bf16_logits.cu's head_bf16
// (Bf16Logits), optimized_gpt2_step_fused_bf16_gelu_once.cu's linear_dx_bf16 and linear_dw
// (Bf16GeluOnce), optimized_gpt2_step_fused_bf16_gelu_in_flight.cu's kGeluInFlight
// (Bf16GeluInFlight), optimized_gpt2_step_fused_bf16_keep_ln.cu's kKeepLayerNorm (Bf16KeepLn) and
// optimized_gpt2_step_fused_bf16_loss_in_flight.cu's kLossInFlight (Bf16LossInFlight) and
// optimized_gpt2_step_fused_bf16_round_ahead.cu's kRoundAhead (Bf16RoundAhead), which the steps
// after them build on, optimized_gpt2_step_fused_bf16_adamw_rounds.cu's kAdamWRounds
// (Bf16AdamWRounds), optimized_gpt2_step_fused_bf16_ln_grads.cu's kLnGradBf16 (Bf16LnGrads) and
// optimized_gpt2_step_fused_bf16_gelu_in_product.cu's kGeluInProduct (Bf16GeluInProduct) and
// optimized_gpt2_step_fused_bf16_gelu_forward_in_product.cu's kGeluForwardInProduct
// (Bf16GeluForwardInProduct).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <string>

#include "gpt2/fused/gelu_product.cuh"
#include "gpt2/fused/policies.cuh"
#include "lab/memory.hpp"

namespace {

// cuBLASLt's status as the lab's checks report errors.
void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw lab::Error(std::string("cuBLASLt: ") + what + ": " + cublasGetStatusString(status));
}

// The largest power of two up to 256 that divides the address: cuBLASLt's heuristic assumes 256
// unless told, and an algorithm chosen for more than a pointer has fails at the call.
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// Y (M x N, row-major, bf16) = X (M x K) W^T (W: N x K, nn.Linear's), bf16 operands, accumulated in
// fp32 and rounded once on the way out (cuBLAS, column-major: Y^T (N x M) = W (read transposed,
// K x N, ld K)^T X^T (K x M, ld K)). The head's product of optimized_gpt2_step_fused_bf16_logits.cu;
// tests/kernels/products_test.cu holds it to its own arithmetic.
void linear_bf16_out(cublasHandle_t blas, const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int M,
                     int N, int K) {
  const float alpha = 1.f, beta = 0.f;
  LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, W, CUDA_R_16BF, K, X, CUDA_R_16BF, K, &beta,
                         Y, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Y (M x N, row-major, bf16) = X (M x K) W^T (W: N x K, nn.Linear's) + b (N, bf16), accumulated in
// fp32, the bias added in fp32 and the sum rounded once: in cuBLASLt's column-major terms,
// D (N x M) = op(A) B with A = W read transposed (K x N, ld K), B = X (K x M, ld K), and the bias a
// value per row of D.
//
// Its workspace is lent (use_workspace): in the step, the one cuBLAS uses too. The two libraries'
// products run one after another on the step's stream, so one 32 MiB workspace serves both, where
// each had its own (32 MiB less at every phase of steps 10 to 13).
class LtBias {
 public:
  LtBias() { lt_check(cublasLtCreate(&lt_), "create"); }
  void use_workspace(std::uint8_t* at, std::size_t bytes) { workspace_ = at, workspace_bytes_ = bytes; }
  LtBias(const LtBias&) = delete;
  LtBias& operator=(const LtBias&) = delete;
  ~LtBias() { cublasLtDestroy(lt_); }

  // Host work (the descriptors, the heuristic) and one launch on `stream`: in the step, done once,
  // as the graph is captured.
  void run(const __nv_bfloat16* X, const __nv_bfloat16* W, const __nv_bfloat16* b, __nv_bfloat16* Y, int M, int N,
           int K, cudaStream_t stream) {
    Desc op;
    lt_check(cublasLtMatmulDescCreate(&op.d, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    set(op.d, CUBLASLT_MATMUL_DESC_TRANSA, ta);
    set(op.d, CUBLASLT_MATMUL_DESC_TRANSB, tb);
    set(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    set(op.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b);
    Layout a(K, N, K), x(K, M, K), y(N, M, N);
    Preference pref;
    if (!workspace_) throw lab::Error("LtBias::run: no workspace lent (use_workspace)");
    const std::uint64_t bytes = workspace_bytes_;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                  sizeof(bytes)),
             "workspace");
    const std::uint32_t align[4] = {alignment_of(W), alignment_of(X), alignment_of(Y), alignment_of(Y)};
    const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      lt_check(cublasLtMatmulPreferenceSetAttribute(pref.p, which[i], &align[i], sizeof(align[i])), "alignment");
    cublasLtMatmulHeuristicResult_t found{};
    int count = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(lt_, op.d, a.l, x.l, y.l, y.l, pref.p, 1, &found, &count), "heuristic");
    if (count == 0)
      throw lab::Error("cuBLASLt has no bf16 product with a bias epilogue for " + std::to_string(M) + " x " +
                       std::to_string(N) + " x " + std::to_string(K));
    const float one = 1.f, zero = 0.f;
    lt_check(cublasLtMatmul(lt_, op.d, &one, W, a.l, X, x.l, &zero, Y, y.l, Y, y.l, &found.algo, workspace_,
                            workspace_bytes_, stream),
             "matmul");
  }

 private:
  template <class T>
  static void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
    lt_check(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)), "matmul attribute");
  }
  struct Desc {
    cublasLtMatmulDesc_t d = nullptr;
    ~Desc() {
      if (d) cublasLtMatmulDescDestroy(d);
    }
  };
  struct Layout {  // a column-major bf16 matrix of rows x cols, leading dimension ld
    cublasLtMatrixLayout_t l = nullptr;
    Layout(int rows, int cols, int ld) {
      lt_check(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, rows, cols, ld), "layout");
    }
    ~Layout() { cublasLtMatrixLayoutDestroy(l); }
  };
  struct Preference {
    cublasLtMatmulPreference_t p = nullptr;
    Preference() { lt_check(cublasLtMatmulPreferenceCreate(&p), "preference"); }
    ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
  };
  cublasLtHandle_t lt_ = nullptr;
  std::uint8_t* workspace_ = nullptr;  // lent, set before the graph is captured: a graph may not allocate
  std::size_t workspace_bytes_ = 0;
};

// The previous steps' products (Bf16GradGemm: policies.cuh) with linear_bias: the QKV product and
// the MLP's first write bf16 with their bias (policy::LinearBiasProducts), the bias in bf16 (its
// precision says so).
struct Bf16BiasEpilogue : Bf16GradGemm {
  static constexpr const char* kPrecision = "bf16-epilogue-bias";
  LtBias lt;
  Bf16BiasEpilogue(const gpt2::Config& c, gpt2::Phase phase) : Bf16GradGemm(c, phase) {}
  // The step's cuBLAS workspace, lent to cuBLASLt too (policy::NamesWorkspace).
  void use_workspace(std::uint8_t* at, std::size_t bytes) { lt.use_workspace(at, bytes); }
  void linear_bias(cublasHandle_t, const __nv_bfloat16* X, const __nv_bfloat16* W, const __nv_bfloat16* b,
                   __nv_bfloat16* Y, int M, int N, int K, cudaStream_t stream) {
    lt.run(X, W, b, Y, M, N, K, stream);
  }
};

static_assert(policy::Products<Bf16BiasEpilogue> && policy::LinearBiasProducts<Bf16BiasEpilogue>);

// A linear layer's backward in bf16, one product each (cuBLAS, column-major; dY: M x N, X: M x K,
// W: N x K, row-major): dX^T (K x M) = W^T (K x N) dY^T (N x M) written in bf16, and dW^T (K x N) =
// X^T (K x M) dY (M x N) in fp32, both accumulated in fp32.
void linear_dx_bf16(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* W, __nv_bfloat16* dX, int M,
                    int N, int K) {
  const float one = 1.f, zero = 0.f;
  LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, &one, W, CUDA_R_16BF, K, dY, CUDA_R_16BF, N, &zero,
                         dX, CUDA_R_16BF, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
void linear_dw_bf16(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* X, float* dW, int M, int N,
                    int K) {
  const float one = 1.f, zero = 0.f;
  LAB_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, &one, X, CUDA_R_16BF, K, dY, CUDA_R_16BF, N, &zero,
                         dW, CUDA_R_32F, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Bf16BiasEpilogue with linear_backward_bf16 (optimized_gpt2_step_fused_bf16_dact.cu tells the
// lesson): dX in bf16 and dW in fp32, the two products above (policy::BackwardBf16Products). The
// step calls it for the MLP's second product alone.
struct Bf16Dact : Bf16BiasEpilogue {
  static constexpr const char* kPrecision = "bf16-epilogue-bias-dact";
  Bf16Dact(const gpt2::Config& c, gpt2::Phase phase) : Bf16BiasEpilogue(c, phase) {}
  void linear_backward_bf16(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* X,
                            const __nv_bfloat16* W, __nv_bfloat16* dX, float* dW, int M, int N, int K, cudaStream_t) {
    linear_dx_bf16(blas, dY, W, dX, M, N, K);
    linear_dw_bf16(blas, dY, X, dW, M, N, K);
  }
};

static_assert(policy::Products<Bf16Dact> && policy::BackwardBf16Products<Bf16Dact>);

// Bf16Dact with head_bf16 (optimized_gpt2_step_fused_bf16_logits.cu tells the lesson): the head's
// product logits (M x V) = X W^T written in bf16, accumulated in fp32 (linear_bf16_out, the one
// cuBLAS call that differs from linear's: its output type; policy::HeadBf16Products).
struct Bf16Logits : Bf16Dact {
  static constexpr const char* kPrecision = "bf16-epilogue-bias-dact-logits";
  Bf16Logits(const gpt2::Config& c, gpt2::Phase phase) : Bf16Dact(c, phase) {}
  void head_bf16(cublasHandle_t blas, const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int M, int N,
                 int K, cudaStream_t) {
    linear_bf16_out(blas, X, W, Y, M, N, K);
  }
};

static_assert(policy::Products<Bf16Logits> && policy::HeadBf16Products<Bf16Logits>);

// optimized_gpt2_step_fused_bf16_gelu_once.cu's products: Bf16Logits with the MLP's second product's
// backward one product at a time (policy::SplitBackwardProducts), the same two cuBLAS calls that
// linear_backward_bf16 makes together.
struct Bf16GeluOnce : Bf16Logits {
  Bf16GeluOnce(const gpt2::Config& c, gpt2::Phase phase) : Bf16Logits(c, phase) {}
  void linear_dx_bf16(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* W, __nv_bfloat16* dX, int M,
                      int N, int K, cudaStream_t) {
    ::linear_dx_bf16(blas, dY, W, dX, M, N, K);
  }
  void linear_dw(cublasHandle_t blas, const __nv_bfloat16* dY, const __nv_bfloat16* X, float* dW, int M, int N, int K,
                 cudaStream_t) {
    linear_dw_bf16(blas, dY, X, dW, M, N, K);
  }
};

static_assert(policy::Products<Bf16GeluOnce> && policy::SplitBackwardProducts<Bf16GeluOnce>);

// optimized_gpt2_step_fused_bf16_gelu_in_flight.cu's products: Bf16GeluOnce's, with GELU's backward
// between its two backward products for the MLP's second in flight (policy::NamesGeluInFlight).
struct Bf16GeluInFlight : Bf16GeluOnce {
  static constexpr bool kGeluInFlight = true;
  Bf16GeluInFlight(const gpt2::Config& c, gpt2::Phase phase) : Bf16GeluOnce(c, phase) {}
};

static_assert(policy::Products<Bf16GeluInFlight> && policy::NamesGeluInFlight<Bf16GeluInFlight>);

// optimized_gpt2_step_fused_bf16_keep_ln.cu's products: Bf16GeluInFlight's, with the LayerNorms'
// outputs kept for the backward (policy::NamesKeepLayerNorm).
struct Bf16KeepLn : Bf16GeluInFlight {
  static constexpr bool kKeepLayerNorm = true;
  Bf16KeepLn(const gpt2::Config& c, gpt2::Phase phase) : Bf16GeluInFlight(c, phase) {}
};

static_assert(policy::Products<Bf16KeepLn> && policy::NamesKeepLayerNorm<Bf16KeepLn> && Bf16KeepLn::kKeepLayerNorm);

// optimized_gpt2_step_fused_bf16_loss_in_flight.cu's products: Bf16KeepLn's, with the loss kernel in
// flight (policy::NamesLossInFlight).
struct Bf16LossInFlight : Bf16KeepLn {
  static constexpr bool kLossInFlight = true;
  Bf16LossInFlight(const gpt2::Config& c, gpt2::Phase phase) : Bf16KeepLn(c, phase) {}
};

static_assert(policy::Products<Bf16LossInFlight> && policy::NamesLossInFlight<Bf16LossInFlight> &&
              policy::NamesKeepLayerNorm<Bf16LossInFlight> && Bf16LossInFlight::kLossInFlight);

// optimized_gpt2_step_fused_bf16_round_ahead.cu's products: Bf16LossInFlight's, with the weights
// rounded ahead on the side stream (policy::NamesRoundAhead).
struct Bf16RoundAhead : Bf16LossInFlight {
  static constexpr bool kRoundAhead = true;
  Bf16RoundAhead(const gpt2::Config& c, gpt2::Phase phase) : Bf16LossInFlight(c, phase) {}
};

static_assert(policy::Products<Bf16RoundAhead> && policy::NamesRoundAhead<Bf16RoundAhead> &&
              policy::NamesLossInFlight<Bf16RoundAhead> && Bf16RoundAhead::kRoundAhead);

// optimized_gpt2_step_fused_bf16_adamw_rounds.cu's products: Bf16RoundAhead's, with AdamW writing
// the next step's weights' copies (policy::NamesAdamWRounds).
struct Bf16AdamWRounds : Bf16RoundAhead {
  static constexpr bool kAdamWRounds = true;
  Bf16AdamWRounds(const gpt2::Config& c, gpt2::Phase phase) : Bf16RoundAhead(c, phase) {}
};

static_assert(policy::Products<Bf16AdamWRounds> && policy::NamesAdamWRounds<Bf16AdamWRounds> &&
              policy::NamesRoundAhead<Bf16AdamWRounds>);

// optimized_gpt2_step_fused_bf16_ln_grads.cu's products: Bf16AdamWRounds's, with the products before
// the LayerNorms' backward writing their input gradients in bf16 (policy::NamesLnGradBf16), which
// its precision names.
struct Bf16LnGrads : Bf16AdamWRounds {
  static constexpr const char* kPrecision = "bf16-epilogue-bias-dact-logits-dln";
  static constexpr bool kLnGradBf16 = true;
  Bf16LnGrads(const gpt2::Config& c, gpt2::Phase phase) : Bf16AdamWRounds(c, phase) {}
};

static_assert(policy::Products<Bf16LnGrads> && policy::NamesLnGradBf16<Bf16LnGrads> &&
              policy::SplitBackwardProducts<Bf16LnGrads> && policy::NamesAdamWRounds<Bf16LnGrads>);

// optimized_gpt2_step_fused_bf16_gelu_in_product.cu's products: Bf16LnGrads's, with the MLP's second
// product's input gradient made with GELU's backward in its epilogue (policy::NamesGeluInProduct).
// The same roundings: its precision is Bf16LnGrads's.
struct Bf16GeluInProduct : Bf16LnGrads {
  static constexpr bool kGeluInProduct = true;
  Bf16GeluInProduct(const gpt2::Config& c, gpt2::Phase phase) : Bf16LnGrads(c, phase) {
    dgelu_product::prepare_backward();
  }
};

static_assert(policy::Products<Bf16GeluInProduct> && policy::NamesGeluInProduct<Bf16GeluInProduct> &&
              policy::NamesLnGradBf16<Bf16GeluInProduct> && !policy::NamesGeluInProduct<Bf16LnGrads>);

// optimized_gpt2_step_fused_bf16_gelu_forward_in_product.cu's products: Bf16GeluInProduct's, with the
// MLP's first product adding its bias and making GELU in its epilogue (policy::NamesGeluForwardInProduct).
struct Bf16GeluForwardInProduct : Bf16GeluInProduct {
  static constexpr bool kGeluForwardInProduct = true;
  Bf16GeluForwardInProduct(const gpt2::Config& c, gpt2::Phase phase) : Bf16GeluInProduct(c, phase) {
    dgelu_product::prepare_forward();
  }
};

static_assert(policy::NamesGeluForwardInProduct<Bf16GeluForwardInProduct> &&
              policy::NamesGeluInProduct<Bf16GeluForwardInProduct> &&
              !policy::NamesGeluForwardInProduct<Bf16GeluInProduct>);

}  // namespace
