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
// A policy that runs GELU's backward in flight says so with kGeluInFlight true (step 14's), over a
// split backward; false, or absent, names nothing.
struct GeluInFlight : SplitBackward {
  using SplitBackward::SplitBackward;
  static constexpr bool kGeluInFlight = true;
};
struct GeluInFlightOff : SplitBackward {
  using SplitBackward::SplitBackward;
  static constexpr bool kGeluInFlight = false;
};
// A policy that keeps the LayerNorms' outputs says so with kKeepLayerNorm true (step 15's); false,
// or absent, names nothing.
struct KeepLn : Sgemm {
  using Sgemm::Sgemm;
  static constexpr bool kKeepLayerNorm = true;
};
struct KeepLnOff : Sgemm {
  using Sgemm::Sgemm;
  static constexpr bool kKeepLayerNorm = false;
};
// Step 16's flag: the loss kernel in flight, named true or false.
struct LossInFlight : KeepLn {
  using KeepLn::KeepLn;
  static constexpr bool kLossInFlight = true;
};
struct LossInFlightOff : KeepLn {
  using KeepLn::KeepLn;
  static constexpr bool kLossInFlight = false;
};
// Step 17's flag: the weights rounded ahead, named true or false.
struct RoundAhead : LossInFlight {
  using LossInFlight::LossInFlight;
  static constexpr bool kRoundAhead = true;
};
struct RoundAheadOff : LossInFlight {
  using LossInFlight::LossInFlight;
  static constexpr bool kRoundAhead = false;
};
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
