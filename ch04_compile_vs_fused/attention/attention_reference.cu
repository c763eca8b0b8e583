// The attention topic's own part: its inputs, the double-precision reference of one head (with
// the slack a correct kernel of each precision may show, propagated through the algorithm) and
// the verification of both directions' outputs against it.
#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "attention/attention.cuh"

namespace attn {

HeadReference reference_head(const float* q, const float* k, const float* v, const float* dout, int seq, int d,
                             bool causal, Precision prec) {
  constexpr double u = lab::fp32::kUnitRoundoff;
  using lab::fp32::sum_error;
  const double scale = 1.0 / std::sqrt(double(d));
  const std::size_t n = std::size_t(seq) * d;
  const double e_qk = sum_error(d + 2.0) + prec.term;                    // of each score, on scale sum |q k|
  const double e_exp_sum = sum_error(seq + 512.0);                       // the sum of exp, with rescales
  const double e_pv = prec.stored + prec.term + sum_error(seq + 1.0);    // a sum over keys of P x
  HeadReference r;
  r.o.assign(n, 0.0);
  r.o_slack.assign(n, 0.0);
  r.lse.assign(std::size_t(seq), 0.0);
  r.lse_slack.assign(std::size_t(seq), 0.0);
  std::vector<double> p(std::size_t(seq) * seq, 0.0);  // P, row by row
  std::vector<double> rho(std::size_t(seq), 0.0);      // P's relative error, per row
  for (int i = 0; i < seq; ++i) {
    const int last = causal ? i : seq - 1;
    double* pi = &p[std::size_t(i) * seq];
    double m = -std::numeric_limits<double>::infinity(), lo = std::numeric_limits<double>::infinity(), e_s = 0;
    for (int j = 0; j <= last; ++j) {
      double s = 0, mag = 0;
      for (int c = 0; c < d; ++c) {
        const double t = double(q[std::size_t(i) * d + c]) * double(k[std::size_t(j) * d + c]);
        s += t, mag += std::fabs(t);
      }
      pi[j] = s * scale;
      e_s = std::max(e_s, e_qk * scale * mag);
      m = std::max(m, pi[j]);
      lo = std::min(lo, pi[j]);
    }
    double l = 0;
    for (int j = 0; j <= last; ++j) l += std::exp(pi[j] - m);
    r.lse[std::size_t(i)] = m + std::log(l);
    const double range = m - lo;
    const double e_exp = e_exp_sum + 8 * range * u + 3 * (std::fabs(m) + range) * u + 8 * u;
    rho[std::size_t(i)] = 2 * e_s + e_exp + 4 * u;
    r.lse_slack[std::size_t(i)] = e_s + e_exp + 0x1p-21 + 6 * u * std::log(l) + 2 * u * std::fabs(r.lse[std::size_t(i)]);
    const double e_o = rho[std::size_t(i)] + e_pv;
    for (int j = 0; j <= last; ++j) {
      pi[j] = std::exp(pi[j] - m) / l;
      for (int c = 0; c < d; ++c) {
        const double vj = double(v[std::size_t(j) * d + c]);
        r.o[std::size_t(i) * d + c] += pi[j] * vj;
        r.o_slack[std::size_t(i) * d + c] += e_o * pi[j] * std::fabs(vj);
      }
    }
  }
  if (!dout) return r;
  r.dq.assign(n, 0.0);
  r.dk.assign(n, 0.0);
  r.dv.assign(n, 0.0);
  r.dq_slack.assign(n, 0.0);
  r.dk_slack.assign(n, 0.0);
  r.dv_slack.assign(n, 0.0);
  const double e_dp = sum_error(d + 1.0) + prec.term;  // of dP_ij, on sum_c |dO_ic V_jc|
  const double e_ds_sum = sum_error(seq + 1.0);        // of dQ and dK's sums over keys or queries
  std::vector<double> grad(static_cast<std::size_t>(seq));    // dS of row i, scaled
  std::vector<double> grad_e(static_cast<std::size_t>(seq));  // its slack, with the stored rounding
  for (int i = 0; i < seq; ++i) {
    const int last = causal ? i : seq - 1;
    const double* pi = &p[std::size_t(i) * seq];
    const float* doi = dout + std::size_t(i) * d;
    const double rho_i = rho[std::size_t(i)];
    double delta = 0;  // sum_j P dP = sum_c dO O
    for (int c = 0; c < d; ++c) delta += double(doi[c]) * r.o[std::size_t(i) * d + c];
    // M_i = sum_j P_ij sum_c |dO_ic V_jc|: bounds both forms of delta's terms.
    std::vector<double> dp_mag(std::size_t(last) + 1), dp_minus(std::size_t(last) + 1);
    double big_m = 0;
    for (int j = 0; j <= last; ++j) {
      double dp = 0, mag = 0;
      for (int c = 0; c < d; ++c) {
        const double t = double(doi[c]) * double(v[std::size_t(j) * d + c]);
        dp += t, mag += std::fabs(t);
        r.dv[std::size_t(j) * d + c] += pi[j] * double(doi[c]);
        r.dv_slack[std::size_t(j) * d + c] += (rho_i + e_pv) * pi[j] * std::fabs(double(doi[c]));
      }
      dp_minus[std::size_t(j)] = dp - delta;
      grad[std::size_t(j)] = pi[j] * (dp - delta) * scale;
      dp_mag[std::size_t(j)] = mag;
      big_m += pi[j] * mag;
    }
    const double e_delta = (3 * sum_error(seq + d + 2.0) + 2 * rho_i + 3 * prec.term + prec.stored) * big_m;
    for (int j = 0; j <= last; ++j) {
      grad_e[std::size_t(j)] = scale * (pi[j] * (e_dp * dp_mag[std::size_t(j)] + e_delta) +
                                        rho_i * pi[j] * std::fabs(dp_minus[std::size_t(j)])) +
                               (3 * u + prec.stored + prec.term) * std::fabs(grad[std::size_t(j)]);
    }
    for (int j = 0; j <= last; ++j)
      for (int c = 0; c < d; ++c) {
        const double g = grad[std::size_t(j)], ge = grad_e[std::size_t(j)];
        const double kj = double(k[std::size_t(j) * d + c]), qi = double(q[std::size_t(i) * d + c]);
        r.dq[std::size_t(i) * d + c] += g * kj;
        r.dk[std::size_t(j) * d + c] += g * qi;
        r.dq_slack[std::size_t(i) * d + c] += (ge + e_ds_sum * std::fabs(g)) * std::fabs(kj);
        r.dk_slack[std::size_t(j) * d + c] += (ge + e_ds_sum * std::fabs(g)) * std::fabs(qi);
      }
  }
  return r;
}

Inputs::Inputs(const lab::Shape& s, lab::Rng& rng) : dims(s), q(dims.elements()), k(dims.elements()), v(dims.elements()) {
  rng.uniform(q, -1.f, 1.f);
  rng.uniform(k, -1.f, 1.f);
  rng.uniform(v, -1.f, 1.f);
}

std::optional<Precision> precision_named(const std::string& name) {
  if (name == "fp32" || name == "3xtf32") return Precision::fp32();
  if (name == "bf16") return Precision::bf16();
  return std::nullopt;
}

}  // namespace attn

namespace {

// Compares an output of every head with the reference member that `pick` chooses, and its slack.
template <class Pick>
lab::Verdict compare_heads(const attn::Dims& a, const std::vector<float>& got, Pick pick,
                           const std::vector<attn::HeadReference>& refs, lab::Tolerance tol, const char* what,
                           std::size_t per_head) {
  std::vector<double> ref, slack;
  ref.reserve(got.size());
  slack.reserve(got.size());
  for (const auto& r : refs) {
    const auto& [x, e] = pick(r);
    ref.insert(ref.end(), x.begin(), x.end());
    slack.insert(slack.end(), e.begin(), e.end());
  }
  std::vector<std::int64_t> dims{a.batch, a.heads, a.seq};
  if (per_head != std::size_t(a.seq)) dims.push_back(a.d);
  return lab::compare(got, ref, tol, what, dims, slack);
}

// Every head's reference; with dout (host copy of dO), the backward's too.
std::vector<attn::HeadReference> references(const attn::Inputs& in, const std::vector<float>* dout,
                                            attn::Precision prec) {
  const attn::Dims& a = in.dims;
  const auto hq = in.q.download(), hk = in.k.download(), hv = in.v.download();
  std::vector<attn::HeadReference> refs;
  const std::size_t head = std::size_t(a.seq) * a.d;
  for (int h = 0; h < a.bh(); ++h)
    refs.push_back(attn::reference_head(hq.data() + h * head, hk.data() + h * head, hv.data() + h * head,
                                        dout ? dout->data() + h * head : nullptr, a.seq, a.d, a.causal, prec));
  return refs;
}


// The precision the variant declares. Every precision is judged by fp32's tolerance plus the slack
// of its own arithmetic (attn::Precision).
attn::Precision precision_of(const lab::Problem& p) {
  const auto prec = attn::precision_named(p.declared().precision);
  if (!prec)
    throw lab::Error("attention: the variant declares precision '" + p.declared().precision +
                     "', which the reference does not model (fp32, 3xtf32 or bf16)");
  return *prec;
}

lab::Tolerance tolerance_for(attn::Precision prec) {
  lab::Tolerance t = lab::Tolerance::fp32();
  t.name = prec.name;
  return t;
}

using Pair = std::pair<const std::vector<double>&, const std::vector<double>&>;

}  // namespace

lab::Verdict Attention::Problem::verify() {
  const attn::Precision prec = precision_of(*this);
  const auto refs = references(*this, nullptr, prec);
  const lab::Tolerance tol = tolerance_for(prec);
  lab::Verdict v = compare_heads(dims, o.download(), [](const auto& r) { return Pair(r.o, r.o_slack); }, refs, tol, "O",
                                 std::size_t(dims.seq) * dims.d);
  if (declared().writes_output("lse"))
    v.also(compare_heads(dims, lse.download(), [](const auto& r) { return Pair(r.lse, r.lse_slack); }, refs, tol,
                         "lse", std::size_t(dims.seq)));
  return v;
}

AttentionBackward::Problem::Problem(const lab::Shape& s, lab::Rng& rng)
    : attn::Inputs(s, rng), dout(dims.elements()), dq(dims.elements()), dk(dims.elements()), dv(dims.elements()) {
  rng.uniform(dout, -1.f, 1.f);
}

lab::Verdict AttentionBackward::Problem::verify() {
  const auto hdout = dout.download();
  const attn::Precision prec = precision_of(*this);
  const auto refs = references(*this, &hdout, prec);
  const lab::Tolerance tol = tolerance_for(prec);
  const std::size_t per_head = std::size_t(dims.seq) * dims.d;
  // With one key, P = 1 whatever the scores: dQ and dK are identically zero, checked so.
  lab::Verdict v = compare_heads(dims, dv.download(), [](const auto& r) { return Pair(r.dv, r.dv_slack); }, refs, tol,
                                 "dV", per_head);
  v.also(compare_heads(dims, dq.download(), [](const auto& r) { return Pair(r.dq, r.dq_slack); }, refs, tol, "dQ",
                       per_head));
  return v.also(compare_heads(dims, dk.download(), [](const auto& r) { return Pair(r.dk, r.dk_slack); }, refs, tol,
                              "dK", per_head));
}
