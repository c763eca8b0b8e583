// The model's layout, sizes, initialisation rules and the loss curves' comparison (gpt2_model.hpp).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "gpt2/gpt2_model.hpp"
#include "lab/rng.hpp"

namespace gpt2 {

std::string Config::invalid() const {
  if (layers < 1 || d < 1 || heads < 1 || context < 1 || batch < 1 || vocab < 1)
    return "every extent must be positive";
  if (d % heads != 0) return "d_model (" + std::to_string(d) + ") must be a multiple of heads (" +
                             std::to_string(heads) + ")";
  if (context > kPositions) return "context at most " + std::to_string(kPositions) + " (the position table's rows)";
  if (vocab > (1 << 30)) return "vocab below 2^30";
  return "";
}

namespace {
constexpr double kBf16Operand = 0x1p16;  // a bf16 operand: off by up to 2^-8 of itself, in units of u
}  // namespace

ModelOptions ModelOptions::for_precision(const std::string& precision) {
  ModelOptions o;
  std::string_view products = precision;
  if (products.ends_with("+3xtf32-attention")) {
    products.remove_suffix(std::string_view("+3xtf32-attention").size());
    o.attention_product_error = 12, o.attention_sum_error = 1;
  } else if (products.ends_with("+bf16-attention")) {
    products.remove_suffix(std::string_view("+bf16-attention").size());
    o.attention_operand_error = kBf16Operand, o.attention_sum_error = 1;
  }
  if (products == "3xtf32") {
    o.product_error = 12, o.sum_error = 1, o.head_in_fp32 = true;
  } else if (products == "bf16" || products == "bf16-epilogue-bias" || products == "bf16-epilogue-bias-dact" ||
             products == "bf16-epilogue-bias-dact-logits" || products == "bf16-epilogue-bias-dact-logits-dln") {
    // Each name is the one before it and one rounding more.
    o.operand_error = kBf16Operand, o.sum_error = 1, o.hidden_in_bf16 = true;
    o.epilogue_bias_in_bf16 = products != "bf16";
    o.mlp_grad_in_bf16 = products.starts_with("bf16-epilogue-bias-dact");
    o.logits_in_bf16 = products.starts_with("bf16-epilogue-bias-dact-logits");
    o.ln_grad_in_bf16 = products == "bf16-epilogue-bias-dact-logits-dln";
  } else if (products != "fp32") {
    throw std::invalid_argument("gpt2: no rounding model for the precision '" + precision +
                                "' (the reference knows fp32, 3xtf32, bf16, bf16-epilogue-bias, "
                                "bf16-epilogue-bias-dact, bf16-epilogue-bias-dact-logits and "
                                "bf16-epilogue-bias-dact-logits-dln, each optionally with +3xtf32-attention or "
                                "+bf16-attention)");
  }
  return o;
}

bool ModelOptions::same_precision_stand_in(ModelOptions& out) const {
  if (operand_error != kBf16Operand) return false;
  out = *this;
  out.products = Products::bf16;
  out.attention_in_bf16 = attention_operand_error == kBf16Operand;
  return true;
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward: return "forward";
    case Phase::forward_backward: return "fwd_bwd";
    case Phase::step: return "full_step";
  }
  return "?";
}

std::vector<Tensor> layout(const Config& c) {
  using K = Tensor::Kind;
  const std::int64_t d = c.d, V = c.vocab;
  std::vector<Tensor> t;
  std::size_t at = 0;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, K kind) {
    std::size_t n = 1;
    for (auto s : shape) n *= std::size_t(s);
    t.push_back({std::move(name), std::move(shape), at, n, kind});
    at += n;
  };
  add("wte.weight", {V, d}, K::embedding);
  add("wpe.weight", {kPositions, d}, K::embedding);
  for (int l = 0; l < c.layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    add(b + "ln1.weight", {d}, K::gain);
    add(b + "ln1.bias", {d}, K::shift);
    add(b + "attn.qkv.weight", {3 * d, d}, K::weight);
    add(b + "attn.qkv.bias", {3 * d}, K::bias);
    add(b + "attn.proj.weight", {d, d}, K::output_weight);
    add(b + "attn.proj.bias", {d}, K::bias);
    add(b + "ln2.weight", {d}, K::gain);
    add(b + "ln2.bias", {d}, K::shift);
    add(b + "mlp.fc.weight", {4 * d, d}, K::weight);
    add(b + "mlp.fc.bias", {4 * d}, K::bias);
    add(b + "mlp.proj.weight", {d, 4 * d}, K::output_weight);
    add(b + "mlp.proj.bias", {d}, K::bias);
  }
  add("lnf.weight", {d}, K::gain);
  add("lnf.bias", {d}, K::shift);
  add("head.weight", {V, d}, K::weight);
  return t;
}

std::size_t param_count(const Config& c) {
  const std::size_t d = c.d, V = c.vocab;
  return V * d + kPositions * d + c.layers * (12 * d * d + 13 * d) + 2 * d + V * d;
}

Offsets offsets(const Config& c) {
  const auto t = layout(c);
  Offsets o{};
  o.wte = t[0].offset;
  o.wpe = t[1].offset;
  for (int l = 0; l < c.layers; ++l) {
    const std::size_t i = 2 + 12 * std::size_t(l);
    o.blocks.push_back({t[i].offset, t[i + 1].offset, t[i + 2].offset, t[i + 3].offset, t[i + 4].offset,
                        t[i + 5].offset, t[i + 6].offset, t[i + 7].offset, t[i + 8].offset, t[i + 9].offset,
                        t[i + 10].offset, t[i + 11].offset});
  }
  const std::size_t i = 2 + 12 * std::size_t(c.layers);
  o.lnf_w = t[i].offset;
  o.lnf_b = t[i + 1].offset;
  o.head = t[i + 2].offset;
  return o;
}

namespace {
std::size_t stage_begin(const Offsets& o, int layers, int stage) {
  return stage < layers ? o.blocks[stage].ln1_w : o.lnf_w;
}
}  // namespace

std::size_t stage_begin(const Config& c, int stage) { return stage_begin(offsets(c), c.layers, stage); }

SavedPlan plan_saved(const Config& c, std::span<const std::size_t> floats) {
  if (floats.size() != std::size_t(c.layers) + 1)
    throw std::invalid_argument("plan_saved: one size a block and one for the head");
  const Offsets o = offsets(c);  // once, not once a stage
  SavedPlan plan;
  for (int s = 0; s <= c.layers; ++s) {
    if (plan.grads_used + floats[s] <= stage_begin(o, c.layers, s)) {
      plan.stages.push_back({true, plan.grads_used});
      plan.grads_used += floats[s];
    } else {
      plan.stages.push_back({false, plan.spill});
      plan.spill += floats[s];
    }
  }
  return plan;
}

ForwardSaved plan_forward_saved(std::size_t block, std::size_t kept, std::size_t late) {
  return {.kept = 0, .block = kept, .late = kept, .floats = kept + std::max(block, late)};
}

InitRule init_rule(const Config& c, const Tensor& t) {
  using K = Tensor::Kind;
  using D = InitRule::Draw;
  switch (t.kind) {
    case K::embedding:
    case K::weight: return {D::normal, 0.f, 0.02f};
    case K::output_weight: return {D::normal, 0.f, float(0.02 / std::sqrt(2.0 * c.layers))};
    case K::gain: return {D::uniform, 1.f, 0.1f};
    case K::shift:
    case K::bias: return {D::uniform, 0.f, 0.02f};
  }
  return {D::normal, 0.f, 0.02f};
}

std::string compare_curves(std::span<const double> reference, std::span<const double> other,
                           const CurveTolerance& tol) {
  if (reference.size() != other.size())
    return "the curves have " + std::to_string(reference.size()) + " and " + std::to_string(other.size()) + " steps";
  if (tol.window < 1) return "the window must be at least one step";
  if (reference.size() < std::size_t(tol.window))
    return "fewer steps (" + std::to_string(reference.size()) + ") than one window (" + std::to_string(tol.window) +
           ")";
  for (std::size_t s = 0; s + tol.window <= reference.size(); ++s) {
    double a = 0, b = 0;
    for (int k = 0; k < tol.window; ++k) a += reference[s + k], b += other[s + k];
    a /= tol.window, b /= tol.window;
    if (!std::isfinite(b) || !(std::fabs(a - b) <= std::max(tol.abs_nats, tol.rel * std::fabs(a)))) {
      std::ostringstream o;
      o << "steps " << s << " to " << s + tol.window - 1 << ": mean loss " << a << " against " << b
        << " (allowed " << std::max(tol.abs_nats, tol.rel * std::fabs(a)) << ")";
      return o.str();
    }
  }
  return "";
}

std::vector<std::int32_t> synthetic_corpus(int vocab, std::size_t length, std::uint64_t seed) {
  if (vocab < 1 || length < 1) throw std::invalid_argument("synthetic_corpus: vocab and length must be positive");
  // The lab's counter-based bits (lab/rng.hpp; bits(seed, 0), bits(seed, 1), ... is SplitMix64's
  // stream from `seed`): the same walk on every platform. A draw below n is the remainder (its
  // bias is below n / 2^64).
  std::uint64_t j = 0;
  auto below = [&](std::int32_t n) { return std::int32_t(lab::rng_detail::bits(seed, j++) % std::uint64_t(n)); };
  std::vector<std::int32_t> perm(vocab);
  for (int i = 0; i < vocab; ++i) perm[i] = i;
  for (int i = vocab - 1; i > 0; --i) std::swap(perm[i], perm[below(i + 1)]);
  std::vector<std::int32_t> out(length);
  out[0] = below(vocab);
  for (std::size_t i = 1; i < length; ++i) out[i] = below(8) < 7 ? perm[out[i - 1]] : below(vocab);
  return out;
}

double corpus_entropy(int vocab) {
  // The next token is perm(x) with probability 7/8 + 1/(8V), each other one with 1/(8V).
  const double v = vocab, follow = 7.0 / 8 + 1 / (8 * v), other = 1 / (8 * v);
  return -follow * std::log(follow) - (v - 1) * other * std::log(other);
}

void corpus_batch(std::span<const std::int32_t> corpus, const Config& c, int step, std::vector<std::int32_t>& tokens,
                  std::vector<std::int32_t>& targets) {
  const std::size_t T = c.context, windows = corpus.size() - 1;
  if (corpus.size() < T + 1) throw std::invalid_argument("corpus_batch: the corpus is shorter than one window");
  tokens.resize(c.tokens()), targets.resize(c.tokens());
  for (int b = 0; b < c.batch; ++b) {
    const std::size_t start = ((std::size_t(step) * c.batch + b) * T) % (windows - T + 1);
    for (std::size_t t = 0; t < T; ++t) {
      tokens[b * T + t] = corpus[start + t];
      targets[b * T + t] = corpus[start + t + 1];
    }
  }
}

}  // namespace gpt2
