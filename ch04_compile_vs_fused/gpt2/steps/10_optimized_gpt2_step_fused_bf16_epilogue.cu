// Fused, mixed precision, two biases added by the products' epilogue: the previous step
// (optimized_gpt2_step_fused_bf16_rows.cu) with one change, in the forward's QKV product and the
// MLP's first. There each product wrote its rows in fp32 (cuBLAS: bf16 operands, fp32 output), and
// the pass after it read them back to add the bias and round to bf16:
//  - qkv_heads_kernel: Q, K, V by head, bias added, rounded (12 B read, 6 B written a token a
//    column of the model);
//  - bias_gelu_kernel: h = the pre-activation, bias added, rounded and kept for the backward, and
//    act = gelu(h) (16 B read, 8 B written a token a column of the model, of four).
// Here the two products run through cuBLASLt with the BIAS epilogue (LtBias below): the product's
// fp32 accumulator plus the bias, rounded once to bf16 as it leaves the registers. The passes after
// it read bf16 and add nothing: qkv_heads_kernel only lays the rows out by head, and GELU's pass is
// the backward's gelu_kernel, act from h.
//
// Why it is faster: the products write 2 B an element where they wrote 4, and the passes read 2 B
// where they read 4. An element of the MLP's 4d columns moved 12 B (4 written by the product, 4
// read and 4 written by the pass) and moves 6; one of the QKV's 3d moved 10 and moves 6: 36 B less
// a token a column of the model a block, 1.36 GB a step at small, context 1024 (0.45 ms at 3 TB/s).
//
// The arithmetic differs from the previous step's in one rounding, which the step declares: with a
// bf16 output, cuBLASLt's epilogue reads the bias in bf16 (the output's type; an fp32 bias is
// refused for bf16 outputs), so the two biases are their bf16 copies (rounded with the stage's
// weights), as autocast rounds nn.Linear's bias. The sum is still formed in fp32 (the epilogue
// computes in the scale type) and rounded once. The precision "bf16-epilogue-bias" has the check's
// model round those two biases too (gpt2::ModelOptions::epilogue_bias_in_bf16). cuBLASLt also has
// GELU epilogues (GELU_AUX_BIAS, DGELU_BGRAD) that would take GELU's pass too, but theirs is the
// tanh approximation, and the model's GELU is the exact one (erf), as PyTorch's nn.GELU(): a
// different function, not a faster one.
//
// What it replaces, against the previous step:
//   | before                                                  | this step's                                 |
//   | ------------------------------------------------------- | ------------------------------------------- |
//   | QKV product to fp32; qkv_heads_kernel adds the bias     | cuBLASLt BIAS epilogue to bf16; laid out    |
//   | MLP's first product to fp32; bias_gelu_kernel (h, act)  | cuBLASLt BIAS epilogue writes h; gelu_kernel |
// lab-arch: sm_90a
// Run: make ch04 && ./ch04_compile_vs_fused/optimized_gpt2_step_fused_bf16_epilogue
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "gpt2/fused/hopper_attention.cuh"
#include "gpt2/fused/step.cuh"

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

// Y (M x N, row-major, bf16) = X (M x K) W^T (W: N x K, nn.Linear's) + b (N, bf16), accumulated in
// fp32, the bias added in fp32 and the sum rounded once: in cuBLASLt's column-major terms,
// D (N x M) = op(A) B with A = W read transposed (K x N, ld K), B = X (K x M, ld K), and the bias a
// value per row of D.
class LtBias {
 public:
  LtBias() : workspace_(std::size_t(32) << 20) { lt_check(cublasLtCreate(&lt_), "create"); }
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
    const std::uint64_t bytes = workspace_.size();
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
    lt_check(cublasLtMatmul(lt_, op.d, &one, W, a.l, X, x.l, &zero, Y, y.l, Y, y.l, &found.algo, workspace_.data(),
                            workspace_.size(), stream),
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
  lab::DeviceBuffer<std::uint8_t> workspace_;  // set explicitly: a graph may not allocate
};

// The previous steps' products (Bf16GradGemm: policies.cuh) with linear_bias: the QKV product and
// the MLP's first write bf16 with their bias (policy::LinearBiasProducts), the bias in bf16 (its
// precision says so).
struct Bf16BiasEpilogue : Bf16GradGemm {
  static constexpr const char* kPrecision = "bf16-epilogue-bias";
  LtBias lt;
  Bf16BiasEpilogue(const gpt2::Config& c, gpt2::Phase phase) : Bf16GradGemm(c, phase) {}
  void linear_bias(cublasHandle_t, const __nv_bfloat16* X, const __nv_bfloat16* W, const __nv_bfloat16* b,
                   __nv_bfloat16* Y, int M, int N, int K, cudaStream_t stream) {
    lt.run(X, W, b, Y, M, N, K, stream);
  }
};

static_assert(policy::Products<Bf16BiasEpilogue> && policy::LinearBiasProducts<Bf16BiasEpilogue>);

using FusedBf16Epilogue = FusedStep<Bf16BiasEpilogue, HopperRows>;  // HopperRows: hopper_attention.cuh

}  // namespace

LAB_VARIANT_CLASS_STEP(FusedBf16Epilogue, LAB_STEP,
                       "fused, mixed precision, the QKV and MLP-first products' biases (in bf16) added by cuBLASLt's "
                       "epilogue as they write bf16, the passes after them reading bf16 (sm_90a)");
