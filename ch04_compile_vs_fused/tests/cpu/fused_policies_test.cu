// The fused GPT-2 step's two policies (gpt2/fused/policies.cuh), both ways, checked when this file
// compiles: the policies the steps use satisfy the concepts, and each class below, which breaks
// one rule, does not (FusedStep<it> would then stop the build with the static_assert naming it).
#include "gpt2/fused/policies.cuh"

// The classes below exist to be tested by the concepts, never called.
#pragma nv_diag_suppress 177

namespace {

struct LinearWithoutTheStream {
  static constexpr const char* kPrecision = "fp32";
  LinearWithoutTheStream(const gpt2::Config&, gpt2::Phase) {}
  void linear(cublasHandle_t, const float*, const float*, float*, int, int, int) {}
  void linear_backward(cublasHandle_t, const float*, const float*, const float*, float*, float*, float*, int, int, int,
                       cudaStream_t) {}
};
struct NoPrecision {
  NoPrecision(const gpt2::Config&, gpt2::Phase) {}
  void linear(cublasHandle_t, const float*, const float*, float*, int, int, int, cudaStream_t) {}
  void linear_backward(cublasHandle_t, const float*, const float*, const float*, float*, float*, float*, int, int, int,
                       cudaStream_t) {}
};
struct HeadWithAnotherSignature : Sgemm {
  using Sgemm::Sgemm;
  void head(cublasHandle_t, const float*, const float*, float*, int, int, cudaStream_t) {}  // one size short
};
// A policy whose backward reads dY in bf16 (Grad) takes it so; one that declares Grad but still
// takes an fp32 dY breaks the rule (the step would hand it bf16).
struct Bf16Grads {
  static constexpr const char* kPrecision = "bf16";
  using Operand = __nv_bfloat16;
  using Grad = __nv_bfloat16;
  Bf16Grads(const gpt2::Config&, gpt2::Phase) {}
  void linear(cublasHandle_t, const __nv_bfloat16*, const __nv_bfloat16*, float*, int, int, int, cudaStream_t) {}
  void linear_backward(cublasHandle_t, const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, float*,
                       float*, float*, int, int, int, cudaStream_t) {}
};
struct GradDeclaredButFp32Backward {
  static constexpr const char* kPrecision = "bf16";
  using Operand = __nv_bfloat16;
  using Grad = __nv_bfloat16;
  GradDeclaredButFp32Backward(const gpt2::Config&, gpt2::Phase) {}
  void linear(cublasHandle_t, const __nv_bfloat16*, const __nv_bfloat16*, float*, int, int, int, cudaStream_t) {}
  void linear_backward(cublasHandle_t, const float*, const __nv_bfloat16*, const __nv_bfloat16*, float*, float*,
                       float*, int, int, int, cudaStream_t) {}
};
// A policy that splits a backward into its two products names both (step 13's); naming one alone
// breaks the rule (the step would call the other).
struct SplitBackward : Bf16Grads {
  using Bf16Grads::Bf16Grads;
  void linear_dx_bf16(cublasHandle_t, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int, int, int,
                      cudaStream_t) {}
  void linear_dw(cublasHandle_t, const __nv_bfloat16*, const __nv_bfloat16*, float*, int, int, int, cudaStream_t) {}
};
struct SplitBackwardWithoutDw : Bf16Grads {
  using Bf16Grads::Bf16Grads;
  void linear_dx_bf16(cublasHandle_t, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int, int, int,
                      cudaStream_t) {}
};
// The steps' flags (kGeluInFlight, kKeepLayerNorm, ...): a policy Name over Base that names flag
// with value. Named true, the concept sees it; false, or absent, it names nothing.
#define FLAG_POLICY(Name, Base, flag, value) \
  struct Name : Base {                       \
    using Base::Base;                        \
    static constexpr bool flag = value;      \
  }
// Step 14's GELU backward in flight, over a split backward.
FLAG_POLICY(GeluInFlight, SplitBackward, kGeluInFlight, true);
FLAG_POLICY(GeluInFlightOff, SplitBackward, kGeluInFlight, false);
// Step 15's LayerNorms' outputs kept.
FLAG_POLICY(KeepLn, Sgemm, kKeepLayerNorm, true);
FLAG_POLICY(KeepLnOff, Sgemm, kKeepLayerNorm, false);
// Step 16's loss kernel in flight.
FLAG_POLICY(LossInFlight, KeepLn, kLossInFlight, true);
FLAG_POLICY(LossInFlightOff, KeepLn, kLossInFlight, false);
// Step 17's weights rounded ahead.
FLAG_POLICY(RoundAhead, LossInFlight, kRoundAhead, true);
FLAG_POLICY(RoundAheadOff, LossInFlight, kRoundAhead, false);
#undef FLAG_POLICY
struct AttentionWithoutBackward {
  static constexpr const char* kPrecision = "fp32";
  AttentionWithoutBackward(const gpt2::Config&, gpt2::Phase) {}
  static constexpr auto forward = flash::forward;
};

static_assert(policy::Products<Sgemm> && policy::Attention<FlashFp32>);
static_assert(!policy::Products<LinearWithoutTheStream>);
static_assert(!policy::Products<NoPrecision>);
static_assert(policy::Products<HeadWithAnotherSignature> && policy::NamesHead<HeadWithAnotherSignature> &&
              !policy::HeadProducts<HeadWithAnotherSignature>);
static_assert(!policy::Attention<AttentionWithoutBackward>);
static_assert(policy::Products<Bf16Grads> && std::is_same_v<grad_of<Bf16Grads>::type, __nv_bfloat16>);
static_assert(!policy::Products<GradDeclaredButFp32Backward>);
static_assert(std::is_same_v<grad_of<Sgemm>::type, float>);
static_assert(policy::NamesSplitBackward<SplitBackward> && policy::SplitBackwardProducts<SplitBackward>);
static_assert(policy::NamesSplitBackward<SplitBackwardWithoutDw> &&
              !policy::SplitBackwardProducts<SplitBackwardWithoutDw>);
static_assert(!policy::NamesSplitBackward<Bf16Grads>);
static_assert(policy::NamesGeluInFlight<GeluInFlight> && policy::NamesSplitBackward<GeluInFlight>);
static_assert(!policy::NamesGeluInFlight<GeluInFlightOff> && !policy::NamesGeluInFlight<SplitBackward>);
static_assert(policy::Products<KeepLn> && policy::NamesKeepLayerNorm<KeepLn>);
static_assert(!policy::NamesKeepLayerNorm<KeepLnOff> && !policy::NamesKeepLayerNorm<Sgemm> &&
              !policy::NamesKeepLayerNorm<GeluInFlight>);
static_assert(policy::Products<LossInFlight> && policy::NamesLossInFlight<LossInFlight>);
static_assert(!policy::NamesLossInFlight<LossInFlightOff> && !policy::NamesLossInFlight<KeepLn> &&
              !policy::NamesLossInFlight<Sgemm>);
static_assert(policy::Products<RoundAhead> && policy::NamesRoundAhead<RoundAhead>);
static_assert(!policy::NamesRoundAhead<RoundAheadOff> && !policy::NamesRoundAhead<LossInFlight> &&
              !policy::NamesRoundAhead<Sgemm>);

}  // namespace
