// The GPT-2-style language model of the chapter's capstone, as our users benchmark it (their
// transformer benchmark), and its reference in double. Host code only: the CPU tests use it without a GPU.
//
// The model: token embedding wte (V x d) plus a learned position embedding wpe (1024 x d); L
// pre-LayerNorm blocks, each
//   x = x + proj(attention(qkv(ln1(x))))       causal multi-head self-attention, h heads of d / h
//   x = x + fc2(gelu(fc(ln2(x))))              the MLP d -> 4d -> d, exact (erf) GELU
// every projection with a bias; a final LayerNorm, an untied head to the vocabulary (no bias), and
// the mean cross-entropy of the next token over the batch's B x T positions. LayerNorm's eps is
// 1e-5 (PyTorch's default). The optimizer is AdamW with PyTorch's defaults.
//
// The parameters live in one flat fp32 buffer, tensor after tensor in the order of layout(), each
// in PyTorch's shape (nn.Linear's weight is out x in), so the same buffer is PyTorch's state dict
// in order, and a multi-tensor optimizer sees one array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lab/monte_carlo.hpp"
#include "lab/verify.hpp"

namespace gpt2 {

inline constexpr int kPositions = 1024;  // rows of wpe: the longest context
inline constexpr double kLayerNormEps = 1e-5;

struct Config {
  int layers = 2, d = 64, heads = 4, context = 16, batch = 2, vocab = 97;
  int head_dim() const { return d / heads; }
  std::size_t tokens() const { return std::size_t(batch) * context; }  // B x T positions
  // "" when the model is well formed, else what is wrong (d divisible by heads, T <= 1024, ...).
  std::string invalid() const;
};

// What a timed run does: the loss only (nothing kept for a backward), the loss and every
// parameter's gradient, or both and the AdamW update of the parameters.
enum class Phase { forward = 1, forward_backward = 2, step = 3 };
const char* phase_name(Phase);  // "forward", "fwd_bwd", "full_step" (the seed's column prefixes)

// The model sizes of the seed's table.
struct NamedSize {
  const char* name;
  int d, layers, heads;
};
inline constexpr NamedSize kSizes[] = {
    {"small", 768, 12, 12}, {"medium", 1024, 24, 16}, {"large", 1280, 36, 20}, {"xl", 1600, 48, 25},
    {"2.7B", 2560, 32, 32}};
inline constexpr int kContexts[] = {128, 256, 512, 1024};
inline constexpr int kBatch = 4, kVocab = 10000;

// One parameter tensor in the flat buffer.
struct Tensor {
  std::string name;                 // PyTorch's state-dict name, e.g. "blocks.0.attn.qkv.weight"
  std::vector<std::int64_t> shape;  // PyTorch's shape
  std::size_t offset = 0, size = 0;
  enum class Kind { embedding, weight, output_weight, bias, gain, shift } kind = Kind::weight;
};

// Every tensor, in order: wte, wpe; per block ln1 (weight, bias), qkv (weight 3d x d, bias),
// proj (d x d, bias), ln2, fc (4d x d, bias), fc2 (d x 4d, bias); lnf; head (V x d).
std::vector<Tensor> layout(const Config&);
std::size_t param_count(const Config&);

// Offsets of one block's tensors (and of the model's), for the kernels and the reference.
struct BlockOffsets {
  std::size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
};
struct Offsets {
  std::size_t wte, wpe, lnf_w, lnf_b, head;
  std::vector<BlockOffsets> blocks;
};
Offsets offsets(const Config&);

// Where a training step can keep what its forward saves for the backward without memory of its
// own: in the gradients' buffer. The backward writes the gradients stage by stage, the head's (with
// the final LayerNorm's) first, then block L-1's down to block 0's, the embeddings' last, and in the
// flat layout each stage's gradients lie above those of every stage written after it. So the
// gradients below stage_begin(c, s), stage s's first parameter (s = 0 .. L-1 a block, s = L the
// final LayerNorm and the head), are still unwritten for as long as stage s's saved tensors are
// read, and during the forward none is written. plan_saved places stage s's saved tensors
// (floats[s] floats, s = 0 .. L) in stage order at the next free offset of the gradients' buffer
// when they end at or below stage_begin(c, s), and in a spill buffer of their own when they do not.
// Offsets are multiples of 64 floats when the sizes are (256-byte alignment).
std::size_t stage_begin(const Config&, int stage);
struct SavedPlace {
  bool in_grads = false;  // else in the spill buffer
  std::size_t offset = 0;
};
struct SavedPlan {
  std::vector<SavedPlace> stages;  // L + 1
  std::size_t grads_used = 0, spill = 0;  // floats taken from the gradients' buffer and spilled
};
SavedPlan plan_saved(const Config&, std::span<const std::size_t> floats);

// The forward alone keeps one block's saved tensors, reused by every block, and the head's in one
// buffer: `block` floats; the head's `kept` (the final LayerNorm's outputs, which the last block's
// last pass writes while it reads the block's tensors, and the head's product reads after it) and
// its `late` (the head's weights' copy and the logits, made after that pass, when the block's
// tensors are dead). So the kept part lies first, and the block's tensors and the late part both
// after it, the late over the block's: kept + max(block, late) floats, and neither the block nor
// the late part ever over the kept part (which a small model with a large vocabulary's late part,
// carved from the buffer's start, once overwrote: 2026-12-03, the fuzz).
struct ForwardSaved {
  std::size_t kept = 0, block = 0, late = 0;  // offsets, in floats
  std::size_t floats = 0;                     // the buffer's size
};
ForwardSaved plan_forward_saved(std::size_t block, std::size_t kept, std::size_t late);

// AdamW with PyTorch's defaults (torch.optim.AdamW): weight decay decoupled from the gradient,
// applied to every parameter, and bias corrections at step t (t = 1 for the first step).
struct AdamW {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// Seeded initialisation, identical for every variant: GPT-2's normal(0, 0.02) weights and
// embeddings, output projections (attn.proj, mlp.fc2) scaled by 1 / sqrt(2 L); LayerNorm gains
// 1 + uniform(-0.1, 0.1) and shifts and biases uniform(-0.02, 0.02) rather than exactly 1 and 0,
// so that a kernel that drops a gain or a bias fails the checks. The standard deviation (or
// half-width) of each tensor's draw:
struct InitRule {
  enum class Draw { normal, uniform } draw;
  float center, spread;
};
InitRule init_rule(const Config&, const Tensor&);

// The choices a model can make that the reference follows (the tests plant wrong ones), and how a
// variant's linear layers round, for the Monte Carlo runs of expected().
struct ModelOptions {
  enum class Gelu { erf, tanh } gelu = Gelu::erf;  // PyTorch's approximate='none' or 'tanh'
  bool decoupled_weight_decay = true;              // AdamW; false: Adam with L2 in the gradient
  // The linear layers' matrix products beyond fp32's own rounding, in units of u = 2^-24 (0, 0 and
  // 0: cuBLAS SGEMM, each product and each partial sum correctly rounded): operand_error, each
  // operand's relative error from its rounding to a narrower type, which is a function of its value
  // (equal operands rounded alike, wherever they occur); product_error, each product's further
  // relative error; sum_error, each addition's further rounding.
  double operand_error = 0, product_error = 0, sum_error = 0;
  // How the fp32 stand-in (T = float) multiplies in the linear layers, for the tests: in fp32; in
  // tf32 (each operand rounded to tf32); or in 3xTF32 as optimized_gpt2_step_fused_3xtf32 does (three
  // sums of products of the split operands, small big, big small, big big, then added); in bf16 or
  // in e4m3's 4 significant bits (each operand rounded to nearest, even; the products summed in fp32).
  enum class Products { fp32, tf32, tf32x3, bf16, e4m3 } products = Products::fp32;
  // The head's products in fp32 (cuBLAS SGEMM) whatever the three above say for the blocks'.
  bool head_in_fp32 = false;
  // The MLP's pre-activation h = fc(ln2(x)) + b kept in bf16 (rounded to nearest, even, once, after
  // its bias), GELU and GELU's derivative both taken at the rounded value, as a step that saves it
  // in bf16 computes them (autocast saves it so): h off by up to 2^-8 of itself, 2^16 u. The double
  // reference ignores it, the Monte Carlo runs perturb h by that much, the fp32 stand-in rounds it.
  bool hidden_in_bf16 = false;
  // The QKV product's and the MLP's first biases rounded to bf16 (to nearest, even) before they are
  // added, as autocast rounds nn.Linear's bias and as cuBLASLt's BIAS epilogue reads it in the
  // output's type (optimized_gpt2_step_fused_bf16_epilogue): each bias off by up to 2^-8 of itself.
  // The double reference ignores it, the Monte Carlo runs perturb those biases by that much (a
  // function of the value), the fp32 stand-in rounds them.
  bool epilogue_bias_in_bf16 = false;
  // The gradient of GELU's output (the MLP's second product's input gradient, dact = dY W) rounded
  // to bf16 before GELU's derivative multiplies it, as autocast's backward writes a product's input
  // gradient in bf16 (optimized_gpt2_step_fused_bf16_dact): each element off by up to 2^-8 of itself.
  // The double reference ignores it, the Monte Carlo runs perturb it, the fp32 stand-in rounds it.
  bool mlp_grad_in_bf16 = false;
  // The logits rounded to bf16 (to nearest, even) before the loss reads them, as autocast's head (a
  // linear layer) writes them in bf16 for the cross-entropy, which computes in fp32 from them
  // (optimized_gpt2_step_fused_bf16_logits): each logit off by up to 2^-8 of itself. The double
  // reference ignores it, the Monte Carlo runs perturb them, the fp32 stand-in rounds them.
  bool logits_in_bf16 = false;
  // The LayerNorms' output gradients (the input gradients of the products that read a LayerNorm's
  // output: the head's, the MLP's first, the QKV product's; dY W) rounded to bf16 before the
  // LayerNorm backward reads them, as autocast's backward writes a product's input gradient in
  // bf16 and LayerNorm's backward takes it from there in fp32 (optimized_gpt2_step_fused_bf16_ln_grads):
  // each element off by up to 2^-8 of itself. The double reference ignores it, the Monte Carlo
  // runs perturb them, the fp32 stand-in rounds them.
  bool ln_grad_in_bf16 = false;
  // The attention's products (Q K^T, P V and the backward's five) beyond fp32's own rounding, as
  // operand_error, product_error and sum_error are for the linear layers'.
  double attention_operand_error = 0, attention_product_error = 0, attention_sum_error = 0;
  // The fp32 stand-in's attention products with their operands rounded to bf16 (Q, K, V, P, dO and
  // dS), as products = bf16 does for the linear layers'. The double reference and the Monte Carlo
  // runs ignore it (attention_operand_error is theirs).
  bool attention_in_bf16 = false;
  // A planted mistake, for the tests of the check's sensitivity: the MLP's first product's odd
  // columns (each token's odd hidden units) scaled by this before its pass reads them (1: none),
  // as tools/planted_bugs.sh's gpt2_bf16_fc_1pct scales them in the bf16 steps' kernel.
  double planted_fc_odd_scale = 1;
  // The fp32 stand-in's bf16 product sums (products = bf16, attention_in_bf16) taken last term to
  // first: another order of addition than the stand-in's own, as a GPU kernel's is, for the tests.
  bool sums_reversed = false;
  // The fp32 stand-in's LayerNorm backward taking g - mean(g), g = dy w, as one fused multiply-add,
  // fma(dy, w, -mean(g)), where it rounds g first: as nvcc contracts the GPU kernels' `dy * w -
  // mean_g` (its default, --fmad=true), for the tests. Another fp32 implementation of the same
  // formula: at d_model 1, where g - mean(g) is exactly zero as written, it is g's rounding error.
  bool contracted = false;
  // A same-precision implementation of these options: the fp32 stand-in rounding where a bf16
  // variant rounds (the products' operands, the attention's where they are bf16, and every value
  // kept in bf16), summing in fp32. Sets out to these options with products = bf16 (and
  // attention_in_bf16 where the attention's operands are bf16) and returns true when the linear
  // layers' operands are bf16; returns false for fp32 and 3xTF32, which have none here.
  bool same_precision_stand_in(ModelOptions& out) const;
  // For the arithmetic a variant declares (lab::Declared::precision): "fp32"; "3xtf32", each operand
  // split into two tf32 parts (each rounded to nearest: 4u of the operand lost), three tf32 products
  // (the small x small one, at most 4u of the product, dropped): 12u a product, and the tensor
  // cores' accumulation, not correctly rounded (up to an ulp, 2u: one more u a sum), in the blocks'
  // linear layers; the head's in fp32, as that step keeps them; "bf16", every linear layer's
  // operands (head included) rounded to bf16, which keeps 8 significant bits: each operand off by up
  // to 2^-8 of itself, 2^16 u (operand_error; the tensor cores multiply bf16 exactly), and 1u a sum
  // for their fp32 accumulation, and the MLP's pre-activation kept in bf16 (hidden_in_bf16);
  // "bf16-epilogue-bias", that and the QKV and MLP-first biases in bf16 (epilogue_bias_in_bf16);
  // "bf16-epilogue-bias-dact", that and GELU's output gradient in bf16 (mlp_grad_in_bf16);
  // "bf16-epilogue-bias-dact-logits", that and the logits in bf16 (logits_in_bf16);
  // "bf16-epilogue-bias-dact-logits-dln", that and the LayerNorms' output gradients in bf16
  // (ln_grad_in_bf16). Any of
  // them may end in "+3xtf32-attention": the attention's products in 3xTF32 too, with the same 12u
  // and 1u (its tensor-core sums are at most a tile, 8 steps, before fp32 adds them); or in
  // "+bf16-attention": every operand of the attention's products (Q, K, V, P, dO, dS) rounded to
  // bf16, 2^16 u an operand and 1u a sum. The Monte Carlo draws an operand's error uniformly over
  // that bound, the same for equal values within a run (a rounding's error is a function of the
  // value: a sum of many equal terms, as a degenerate shape makes, has their errors add up, not
  // average out), where a real rounding's is up to 2^-8 only at the bottom of each binade.
  // Throws std::invalid_argument for another name.
  static ModelOptions for_precision(const std::string& precision);
};

// The optimizer's state before the step: first and second moments and the step number t.
struct OptimizerState {
  std::span<const float> m, v;
  int step = 1;
};

// What the reference computes for one batch: the loss; with Phase::forward_backward and beyond,
// every parameter's gradient (the flat layout); with Phase::step, the parameters and moments after
// the AdamW step.
template <class T>
struct Outputs {
  T loss{};
  std::vector<T> grads, params, m, v;
};

// tokens and targets: B x T ids in [0, V). T is double (the reference) or float (the same formulas
// in fp32: the tests' stand-in for a GPU kernel); gpt2_reference.cpp also runs it in Monte Carlo
// arithmetic for expected().
template <class T>
Outputs<T> reference(const Config& c, Phase phase, std::span<const float> params, std::span<const std::int32_t> tokens,
                     std::span<const std::int32_t> targets, const OptimizerState& opt = {}, const AdamW& hp = {},
                     const ModelOptions& options = {});

// What the checks compare a variant with: the reference in double, and how far fp32 rounding moves
// each output, measured by `runs` Monte Carlo runs of the same formulas (every operation's result
// perturbed at random by up to fp32's rounding; see gpt2_reference.cpp): sigma, each element's RMS
// deviation from the reference over the runs, and each tensor's largest L2 deviation among them
// (indexed like layout(); the loss's in loss_l2).
// 16 runs: sigma's estimate then has 16 degrees of freedom, and the element test's k (below) at a
// false alarm of 1e-12 is 19.9; with 8 it would be 76 (the t distribution's tail is heavy at few
// degrees of freedom), a check four times looser for the same false alarm.
inline constexpr int kMonteCarloRuns = 16;
// Where run `run` of expected(..., seed) starts its stream of perturbations: a splitmix64 state,
// to which each draw adds the golden gamma 0x9e3779b97f4a7c15. A hash of seed and run, so that no
// two runs' streams overlap (for the tests).
std::uint64_t mc_stream_start(std::uint64_t seed, int run);
struct Expected {
  int runs = 0;
  Outputs<double> ref, sigma;
  // With Phase::step, how far AdamW's update bends over the interval the gradient's check allows
  // (g +- a, a = k sigma_g, k = element_k(runs)), for params, m and v: |f(g + a) + f(g - a) -
  // 2 f(g)| / 2, in double, which judge() adds to each element's k sigma. The runs' spread sees
  // the update's response to the runs' gradient deviations, about sigma_g; a kernel's may reach
  // k sigma_g (19.9 of them), and the part of the response that is not linear in it grows as its
  // square. v = beta2 v0 + (1 - beta2) g^2 is where it shows: at a gradient near zero beside
  // sigma_g the runs' v moves by (1 - beta2) sigma_g^2, the kernel's by up to (1 - beta2) k^2
  // sigma_g^2, k times more than k sigma_v allows (a correct bf16 stand-in failed so at one seed
  // in CI). For v the second difference is that remainder exactly (1 - beta2) a^2; for m, linear,
  // zero; for the parameter it is the remainder to second order, a being small beside the scale on
  // which the update bends (sqrt(v / (1 - beta2)), a gradient the size of its running RMS).
  Outputs<double> curvature;
  double loss_l2 = 0;
  std::vector<double> grads_l2, params_l2, m_l2, v_l2;
  // Where the options have a same-precision stand-in (ModelOptions::same_precision_stand_in, the
  // bf16 variants'): that implementation's L2 distance from the reference, each tensor's (indexed
  // like layout()). judge() holds a variant's L2 error to kSamePrecisionFactor times it, as
  // FlashAttention-3's tests hold a kernel to twice the error of PyTorch's same-precision
  // implementation: where the Monte Carlo runs draw each rounding at random over its whole bound,
  // and so must allow what any rounding could do, this is what the declared rounding did do to
  // these inputs.
  bool same_precision = false;
  std::vector<double> stand_in_grads_l2, stand_in_params_l2, stand_in_m_l2, stand_in_v_l2;
  // fp32's own freedom around the stand-in, each tensor's: the largest L2 distance from the
  // stand-in of kFreedomRuns Monte Carlo runs of the stand-in's arithmetic (its roundings to bf16
  // made to nearest, as the stand-in makes them; every fp32 operation perturbed by its rounding, as
  // in the other runs). The stand-in is one fp32 implementation; a GPU kernel is another (another
  // order of addition, a contracted multiply-add, another exp), and may differ from it by this much.
  // Where the stand-in's error is exactly zero (a LayerNorm over one feature passes no gradient:
  // g - mean(g) is zero as the stand-in computes it, and g's rounding error in a kernel that
  // contracts it), this is all a kernel's error can be measured against.
  std::vector<double> freedom_grads_l2, freedom_params_l2, freedom_m_l2, freedom_v_l2;
};
// The runs that measure Expected::freedom_*: the distance's L2 over a tensor of kL2MinDof or more
// degrees of freedom varies by a few tens of percent from run to run, and the largest of 4 is a
// steady yardstick (the check's time grows by 4 runs over kMonteCarloRuns' 16).
inline constexpr int kFreedomRuns = 4;
// The runs go side by side on `threads` threads (0: the machine's cores, or LAB_REFERENCE_THREADS;
// fewer where a shape's runs would hold more than 4 GiB at once); the result is the same, bit for
// bit, whatever the count.
Expected expected(const Config& c, Phase phase, std::span<const float> params, std::span<const std::int32_t> tokens,
                  std::span<const std::int32_t> targets, const OptimizerState& opt = {}, const AdamW& hp = {},
                  const ModelOptions& options = {}, int runs = kMonteCarloRuns, std::uint64_t seed = 1,
                  int threads = 0);

// The check of a variant's outputs (grads, params, m, v empty where the phase has none). Each
// tensor, and the loss, passes when
//   every element is within k sigma of the reference (for params, m and v, plus the update's
//   curvature over the gradient's interval, Expected::curvature), where k is Student's t quantile with `runs`
//   degrees of freedom at a two-sided false alarm of kElementFalseAlarm (a correct fp32 error, about
//   normal with deviation sigma, over sigma's estimate from the runs is t-distributed): over a
//   million elements, a correct kernel fails with probability below 1e-6 (the suites judge some
//   10^7 elements a run: below 1e-4 of runs fail by chance);
//   its L2 error is within kL2Factor times the largest of the runs' (the room a kernel's other
//   order of summation, blocked or pairwise rather than sequential, may need), where that largest
//   is a steady yardstick: the tensor's error has at least kL2MinDof degrees of freedom,
//   (sum sigma^2)^2 / sum sigma^4 (l2_dof(): Satterthwaite's count of equal independent terms).
//   Each run's squared L2 error is then about sigma^2 times a chi-square with that many degrees of
//   freedom, and a kernel whose errors are twice the runs' (rho = 2) has a squared L2 of rho^2 times
//   another; it fails when that exceeds 16 times the largest of 16 runs', with probability (the
//   integral of the chi-square densities) 7e-17 at 32 degrees of freedom, 7e-11 at 16, 1e-5 at 4
//   and 1e-3 at 1. Below kL2MinDof (the loss, one number; a tensor whose error sits in a few
//   elements) the runs' largest is too noisy to scale, and the element test alone decides.
// An element no run moved (sigma 0: a gradient exactly zero) must be exactly the reference.
inline constexpr double kElementFalseAlarm = 1e-12;
inline constexpr double kL2Factor = 4;
inline constexpr double kL2MinDof = 32;
using lab::mc::l2_dof;
// The same-precision test (Expected::same_precision): each tensor with kL2MinDof degrees of freedom
// passes when its L2 error is at most kSamePrecisionFactor times the stand-in's plus fp32's freedom
// around it (Expected::freedom_*: a same-precision kernel's error is at most the stand-in's plus its
// distance from the stand-in), plus kSamePrecisionFloor times the reference's L2 norm (fp32's own
// rounding, where the declared rounding moved a tensor by almost nothing). Until 2026-11-27 the
// bound had no freedom term, and the fuzz found it rejecting a correct kernel: vanilla_bf16 at
// d_model 1 (2x1x1x67x2x93x2, seed 109173136164868), whose wte and wpe gradients are exactly zero
// in the reference and the stand-in and g's rounding error (1e-6) on the GPU
// (Gpt2Reference.SamePrecisionAllowsFp32sFreedomWhereTheStandInIsExact). The verdict's note names
// the tensor nearest its bound and the ratio. On the H100 (2026-11-27, before the freedom term,
// which only widens the bound) every bf16 step passed it at every check shape under three seeds,
// at most 0.80 of the bound, and a product 1% off failed it at 10 of 11 shapes; with the term
// (2026-11-28) every bf16 step passed at most at 0.70 of it, the d_model 1 shape included, and the
// 1% failed at 7 of 11. So it is enforced; SamePrecision::report (a test's) leaves the verdict to the Monte Carlo test
// alone, to show what that test sees by itself.
inline constexpr double kSamePrecisionFactor = 2;
inline constexpr double kSamePrecisionFloor = 0x1p-20;
enum class SamePrecision { enforce, report };
lab::Verdict judge(const Expected& e, const Config& c, float loss, std::span<const float> grads,
                   std::span<const float> params, std::span<const float> m, std::span<const float> v,
                   SamePrecision same_precision = SamePrecision::enforce);
// k above: Student's t quantile for a two-sided tail p with `runs` degrees of freedom.
using lab::mc::element_factor;
// element_factor(runs, kElementFalseAlarm), the element test's k (computed once for kMonteCarloRuns).
double element_k(int runs);

// Two loss curves (one loss a step) agree when every window of `window` consecutive steps has
// means within max(abs_nats, rel x the reference window's mean) of each other. Returns "" when they
// agree, else the first window that does not, with both means.
struct CurveTolerance {
  int window = 10;
  double abs_nats = 0.02, rel = 0.01;
};
std::string compare_curves(std::span<const double> reference, std::span<const double> other,
                           const CurveTolerance& tol = {});

// The fixed synthetic corpus of the training runs: a walk over the vocabulary that goes from token
// x to perm(x) (a seeded permutation) with probability 7/8 and to a uniform token otherwise. A
// model can learn the permutation; the jumps it cannot predict, so no model's mean loss goes below
// the corpus's entropy, corpus_entropy(V) nats a token (0.939 at V = 97). Deterministic on every
// platform (the lab's counter-based bits, no standard distribution).
std::vector<std::int32_t> synthetic_corpus(int vocab, std::size_t length, std::uint64_t seed = 2026);
double corpus_entropy(int vocab);
// Batch `step` (from 0): B windows of T tokens taken in turn along the corpus (wrapping), and
// the tokens that follow each as targets.
void corpus_batch(std::span<const std::int32_t> corpus, const Config& c, int step, std::vector<std::int32_t>& tokens,
                  std::vector<std::int32_t>& targets);

// The training check's run: the tiny configuration, 200 steps on a corpus of 2^15 tokens (PyTorch's
// AdamW defaults, lr 1e-3). The loss starts near ln V (4.57) and must end below kTrainedLoss (the
// mean of the last 10 steps): the double reference ends at 1.25 to 1.29 from eight seeds'
// initialisations, above the corpus's floor of 0.94 and far below where it started. Every
// variant's curve must stay within kTrainCurves of the reference's (the reference in fp32
// arithmetic agreed with it to 4 decimals at every 20th step in the runs tried).
inline constexpr int kTrainSteps = 200;
inline constexpr std::size_t kTrainCorpusLength = std::size_t{1} << 15;
inline constexpr double kTrainedLoss = 1.5;
inline constexpr CurveTolerance kTrainCurves{};
// A mixed-precision variant (its precision "bf16...") must also train as the fp32 fused step does:
// its curve within the same window tolerance of that step's curve from the same parameters. Its
// products' operands carry 2^-8 of themselves where fp32's carry 2^-24, and that may move the
// trajectory, but by no more than what the check already allows any variant against the
// reference: 0.02 nats a 10-step mean (1.5% of the trained loss, 1.25 to 1.29), or 1% of it. The
// test prints the largest window difference each variant reaches, against both curves.
inline constexpr CurveTolerance kMixedPrecisionCurves = kTrainCurves;

// The training run the GPU variants' curves are held to: `steps` AdamW steps of the reference from
// `params` (moments from zero, steps numbered from 1) on corpus_batch(corpus, c, 0, 1, ...),
// arithmetic in T (double: the reference), parameters and moments kept in fp32 between steps as a
// GPU keeps them. Returns the loss before each step.
template <class T>
std::vector<double> train_reference(const Config& c, std::span<const float> params, std::span<const std::int32_t> corpus,
                                    int steps, const AdamW& hp = {});

}  // namespace gpt2
