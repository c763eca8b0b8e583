// The GPT-2 step's problem: seeded inputs on the device, and the check against the reference.
#include "gpt2/gpt2.cuh"

Gpt2Step::Problem::Problem(const lab::Shape& s, lab::Rng& rng)
    : cfg(gpt2::config_of(s)),
      phase(gpt2::phase_of(s)),
      params(gpt2::param_count(cfg)),
      m(phase == gpt2::Phase::step ? params.size() : 0),
      v(phase == gpt2::Phase::step ? params.size() : 0),
      grads(phase == gpt2::Phase::forward ? 0 : params.size()),
      loss(1),
      tokens(cfg.tokens()),
      targets(cfg.tokens()) {
  for (const gpt2::Tensor& t : gpt2::layout(cfg)) {
    const gpt2::InitRule r = gpt2::init_rule(cfg, t);
    if (r.draw == gpt2::InitRule::Draw::normal)
      rng.normal_at(params.data() + t.offset, t.size, r.center, r.spread);
    else
      rng.uniform_at(params.data() + t.offset, t.size, r.center - r.spread, r.center + r.spread);
  }
  rng.integers(tokens, 0, cfg.vocab);  // ids in [0, vocab)
  rng.integers(targets, 0, cfg.vocab);
  if (phase == gpt2::Phase::step) {
    // Moments as after a few steps: m about a gradient's size, v about its square.
    rng.uniform(m, -1e-3f, 1e-3f);
    rng.uniform(v, 1e-8f, 1e-6f);
  }
  LAB_CHECK(cudaDeviceSynchronize());
  if (Gpt2Step::verifiable(s)) {
    params0_ = params.download();
    tokens_ = tokens.download();
    targets_ = targets.download();
    if (phase == gpt2::Phase::step) m0_ = m.download(), v0_ = v.download();
  }
}

void Gpt2Step::Problem::poison(cudaStream_t s) {
  lab::poison(loss, s);
  if (grads.size()) lab::poison(grads, s);
}

void Gpt2Step::Problem::rebase() {
  if (params0_.empty()) throw lab::Error("gpt2_step: this shape is beyond the CPU reference's reach (verifiable())");
  if (phase != gpt2::Phase::step) throw lab::Error("gpt2_step: rebase() follows a full step (phase 3)");
  LAB_CHECK(cudaDeviceSynchronize());
  params0_ = params.download(), m0_ = m.download(), v0_ = v.download();
  ++step;
}

lab::Verdict Gpt2Step::Problem::verify() {
  if (params0_.empty()) throw lab::Error("gpt2_step: this shape is beyond the CPU reference's reach (verifiable())");
  gpt2::ModelOptions rounding;
  try {
    rounding = gpt2::ModelOptions::for_precision(declared().precision);
  } catch (const std::invalid_argument& e) {
    throw lab::Error(std::string("gpt2_step: ") + e.what());
  }
  const gpt2::Expected e =
      gpt2::expected(cfg, phase, params0_, tokens_, targets_, {m0_, v0_, step}, hp, rounding);
  const std::vector<float> l = loss.download();
  std::vector<float> g, p, mm, vv;
  if (phase != gpt2::Phase::forward) g = grads.download();
  if (phase == gpt2::Phase::step) p = params.download(), mm = m.download(), vv = v.download();
  return gpt2::judge(e, cfg, l[0], g, p, mm, vv);
}
