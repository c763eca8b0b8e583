// The attention topic's own part: its inputs, the double-precision reference of one head (with
// the slack a correct kernel of each precision may show, propagated through the algorithm) and
// the verification of both directions' outputs against it.
#include <algorithm>
#include <any>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
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

namespace {

// x rounded to bf16 (8 significant bits, nearest, ties to even), with the spacing of bf16 values at
// x and x's distance from the nearest point halfway between two of them. Below 2^-126 the spacing is
// bf16's subnormal one, 2^-133.
struct Bf16Rounding {
  double value, spacing, to_midpoint;
};
Bf16Rounding round_bf16(double x) {
  if (x == 0) return {0.0, 0x1p-133, 0x1p-134};
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| in [2^(e-1), 2^e)
  const double spacing = std::ldexp(1.0, std::max(e - 8, -133));
  const double units = std::fabs(x) / spacing, low = std::floor(units), frac = units - low;
  double r = low;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(low, 2.0) != 0)) r = low + 1;
  return {std::copysign(r * spacing, x), spacing, std::fabs(frac - 0.5) * spacing};
}

// The emulations' arithmetic model (see attention.cuh).
constexpr double u = lab::fp32::kUnitRoundoff, u2 = u * u;
constexpr double kLog2e = 1.4426950408889634, ln2 = 0.6931471805599453;
constexpr double ex2_var = 0x1p-42;  // ex2.approx's relative error (2^-22.5), with margin: 2^-21, squared
// A tensor-core sum, one instruction (a step: 16 products and the accumulator) at a time: a step
// aligns its addends to the largest and truncates them, at most 20 truncations (16 + 4 for the
// accumulator's partial sums inside the step), each within one ulp of the largest addend, 2u of
// it: a variance of at most 20 (2u big)^2 / 3 for the step's largest addend big.
constexpr int kStep = 16;
double tc_step_var(double big) { return 4 * u2 * (20.0 / 3.0) * big * big; }

double upper_tail(double t) { return 0.5 * std::erfc(t / std::sqrt(2.0)); }  // P(Z > t), Z normal

// A rounding point's flip: the value's error (variance var) against its distance from the nearest
// midpoint (and the far one, a spacing further), into one gradient's model with weight `norm2`
// (the squared norm of the row of the other operand that multiplies this element into it).
void add_flip(Bf16Moment& m, const Bf16Rounding& r, double var, double norm2) {
  if (var <= 0) return;
  const double sigma = std::sqrt(var);
  double p = 0, w = 0;
  if (sigma < r.spacing / 4) {  // a flip moves the element by one spacing
    p = upper_tail(r.to_midpoint / sigma) + upper_tail((r.spacing - r.to_midpoint) / sigma);
    w = r.spacing * r.spacing * norm2;
  } else {  // the error spans spacings: the rounded values differ by at most it and one spacing
    p = 1;
    w = (sigma + r.spacing) * (sigma + r.spacing) * norm2;
  }
  // A flip less likely than 1e-15 is left out (of 10^6 such, the chance that any flips is 1e-9).
  if (p < 1e-15) return;
  m.flip_p.push_back(std::min(p, 1.0));
  m.flip_w.push_back(w);
}

}  // namespace

Bf16Moment& Bf16Moment::operator+=(const Bf16Moment& o) {
  sums += o.sums;
  flip_p.insert(flip_p.end(), o.flip_p.begin(), o.flip_p.end());
  flip_w.insert(flip_w.end(), o.flip_w.begin(), o.flip_w.end());
  return *this;
}

namespace {

// The least t with P(sum of x_i over the events that happen > t) <= 1e-9, as a Chernoff bound:
// events independent, event i happening with probability p[i] and adding x(i) >= 0.
template <class X>
double chernoff_1e9(const std::vector<double>& p, X x) {
  double x_max = 0;
  for (std::size_t i = 0; i < p.size(); ++i) x_max = std::max(x_max, x(i));
  if (x_max == 0) return 0;
  const double log_odds = std::log(1e9);
  // t(theta) = (log 1e9 + K(theta)) / theta, K the events' cumulant generating function; its least
  // value over theta, searched in log theta.
  auto bound = [&](double log_theta) {
    const double theta = std::exp(log_theta);
    double k = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double tx = theta * x(i), pi = p[i];
      k += tx > 30 ? std::log(pi) + tx + std::log1p((1 - pi) * std::exp(-tx) / pi) : std::log1p(pi * std::expm1(tx));
    }
    return (log_odds + k) / theta;
  };
  double lo = std::log(1e-3 / x_max), hi = std::log(1e3 / x_max);
  for (int it = 0; it < 40; ++it) {  // golden section
    const double a = lo + 0.381966 * (hi - lo), b = lo + 0.618034 * (hi - lo);
    if (bound(a) < bound(b)) hi = b; else lo = a;
  }
  return bound(0.5 * (lo + hi));
}

// Each flip's move, what it adds to the L2 distance if it happens. A flip moves its element by one
// spacing at most, so sqrt(w) bounds its move. An entry certain to happen (p = 1) is an error
// spanning spacings, whose w is its standard deviation's: held to kBf16EmulationFactor times it, as
// value() holds it.
std::vector<double> flip_moves(const Bf16Moment& m) {
  std::vector<double> moves(m.flip_w.size());
  for (std::size_t i = 0; i < moves.size(); ++i)
    moves[i] = (m.flip_p[i] >= 1 ? kBf16EmulationFactor : 1.0) * std::sqrt(m.flip_w[i]);
  return moves;
}
double moves_norm(const Bf16Moment& m, const std::vector<double>& moves) {
  return chernoff_1e9(m.flip_p, [&](std::size_t i) { return moves[i]; });
}

}  // namespace

double Bf16Moment::value() const {
  return sums + chernoff_1e9(flip_p, [&](std::size_t i) { return flip_w[i]; });
}

double Bf16Moment::flips_norm() const { return moves_norm(*this, flip_moves(*this)); }

Bf16Distance bf16_emulation_distance(std::span<const float> got, std::span<const double> emulated,
                                     const Bf16Moment& model) {
  double sq = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double dist = double(got[i]) - emulated[i];
    sq += dist * dist;
  }
  const double squares = kBf16EmulationFactor * std::sqrt(model.value());
  // The second bound is at least its flips' mean, sum p move (a Chernoff bound lies above the
  // mean): where that alone passes the first, the first is the lesser, and the second's search is
  // skipped (many flips, a long head).
  const std::vector<double> moves = flip_moves(model);
  double mean = 0;
  for (std::size_t i = 0; i < moves.size(); ++i) mean += model.flip_p[i] * moves[i];
  const double triangle = kBf16EmulationFactor * std::sqrt(model.sums);
  if (triangle + mean >= squares) return {std::sqrt(sq), squares};
  return {std::sqrt(sq), std::min(squares, triangle + moves_norm(model, moves))};
}

Bf16Emulation emulate_bf16_backward(const float* q, const float* k, const float* v, const float* dout, int seq, int d,
                                    bool causal) {
  const double scale = 1.0 / std::sqrt(double(d)), scale_log2 = scale * kLog2e;
  const std::size_t n = std::size_t(seq) * d;
  auto at = [d](int row, int c) { return std::size_t(row) * d + c; };
  std::vector<double> qb(n), kb(n), vb(n), db(n), q2(seq, 0.0), k2(seq, 0.0), d2(seq, 0.0);
  for (int r = 0; r < seq; ++r)
    for (int c = 0; c < d; ++c) {
      const std::size_t i = at(r, c);
      qb[i] = round_bf16(q[i]).value, kb[i] = round_bf16(k[i]).value;
      vb[i] = round_bf16(v[i]).value, db[i] = round_bf16(dout[i]).value;
      q2[r] += qb[i] * qb[i], k2[r] += kb[i] * kb[i], d2[r] += db[i] * db[i];
    }
  Bf16Emulation e;
  e.dq.assign(n, 0.0), e.dk.assign(n, 0.0), e.dv.assign(n, 0.0);
  // Each gradient element's largest addend in its current step of 16 queries (dV, dK) or keys (dQ).
  std::vector<double> big_dk(n, 0.0), big_dv(n, 0.0), big_dq(d, 0.0);
  std::vector<double> s(seq), s_var(seq), ex(seq), ex_var(seq), o(d), o_var(d);
  for (int i = 0; i < seq; ++i) {
    const int last = causal ? i : seq - 1;
    // The eager fp32 forward (cuBLAS S = Q K^T, the scale, a row's online max and sum with
    // __expf, lse = max + logf(sum), cuBLAS O = P V), then delta = rowsum(dO o O) in fp32: their
    // values in double, their errors' variances. The max's own error cancels (in P and in lse). A
    // sum's roundings each err by up to u of the partial sum they round: u^2 times the sum of the
    // squared partial sums, taken in order (a blocked or tree order's partial sums are shorter).
    double m = -std::numeric_limits<double>::infinity(), lo = std::numeric_limits<double>::infinity();
    for (int j = 0; j <= last; ++j) {
      double dot = 0, parts = 0;
      for (int c = 0; c < d; ++c) {
        dot += double(q[at(i, c)]) * double(k[at(j, c)]);
        parts += dot * dot;
      }
      s[j] = dot * scale;
      s_var[j] = scale * scale * u2 * parts + 2 * u2 * s[j] * s[j];
      m = std::max(m, s[j]), lo = std::min(lo, s[j]);
    }
    double l = 0, l_var = 0, l_parts = 0;
    for (int j = 0; j <= last; ++j) {
      const double x = s[j] - m;
      ex[j] = std::exp(x);
      ex_var[j] = s_var[j] + 2 * u2 * x * x + ex2_var;  // relative: x's, x log2 e's and ex2's errors
      l += ex[j];
      l_var += ex[j] * ex[j] * ex_var[j], l_parts += l * l;
    }
    const double range = m - lo;
    // l relative: its terms', the sum's roundings, and the online rescales' (at most 64 on a term's path).
    const double l_rel_var = (l_var + u2 * l_parts) / (l * l) + 64 * (ex2_var + u2 * range * range);
    const double lse = m + std::log(l);
    const double lse_var = l_rel_var + 4 * u2 * std::log(l) * std::log(l) + u2 * lse * lse;
    std::fill(o.begin(), o.end(), 0.0), std::fill(o_var.begin(), o_var.end(), 0.0);
    for (int j = 0; j <= last; ++j) {
      const double p = ex[j] / l, pv = p * p * (ex_var[j] + 2 * u2);  // inv and the product
      for (int c = 0; c < d; ++c) {
        const double vj = double(v[at(j, c)]);
        o[c] += p * vj;
        o_var[c] += pv * vj * vj + u2 * o[c] * o[c];
      }
    }
    // delta: l's error scales all of O (and delta) alike; the rest is independent across c.
    double delta = 0, delta_var = 0;
    for (int c = 0; c < d; ++c) {
      const double g = double(dout[at(i, c)]);
      delta += g * o[c];
      delta_var += g * g * (o_var[c] + u2 * o[c] * o[c]) + u2 * delta * delta;
    }
    delta_var += delta * delta * l_rel_var;
    // The exponent's row part, -lse log2 e, rounded once.
    const double a_row_var = kLog2e * kLog2e * lse_var + u2 * lse * lse * kLog2e * kLog2e;
    std::fill(big_dq.begin(), big_dq.end(), 0.0);
    for (int j = 0; j <= last; ++j) {
      double sb = 0, dp = 0, sb_var = 0, dp_var = 0, sb_big = 0, dp_big = 0;
      for (int c = 0; c < d; ++c) {
        if (c % kStep == 0) sb_big = std::fabs(sb), dp_big = std::fabs(dp);
        const double t = qb[at(i, c)] * kb[at(j, c)], g = db[at(i, c)] * vb[at(j, c)];
        sb += t, dp += g;
        sb_big = std::max(sb_big, std::fabs(t)), dp_big = std::max(dp_big, std::fabs(g));
        if (c % kStep == kStep - 1 || c == d - 1) sb_var += tc_step_var(sb_big), dp_var += tc_step_var(dp_big);
      }
      const double a = sb * scale_log2 - lse * kLog2e;
      const double a_var =
          scale_log2 * scale_log2 * sb_var + u2 * sb * sb * scale_log2 * scale_log2 + a_row_var + u2 * a * a;
      const double p = std::exp2(a), p_var = p * p * (ln2 * ln2 * a_var + ex2_var);
      const double gap = dp - delta, gap_var = dp_var + delta_var + u2 * gap * gap;
      const double ds = p * gap, ds_var = gap * gap * p_var + p * p * gap_var + u2 * ds * ds;
      const Bf16Rounding pr = round_bf16(p), dr = round_bf16(ds);
      add_flip(e.dv_moment, pr, p_var, d2[i]);
      add_flip(e.dk_moment, dr, ds_var, scale * scale * q2[i]);
      add_flip(e.dq_moment, dr, ds_var, scale * scale * k2[j]);
      const bool dq_step_ends = j % kStep == kStep - 1 || j == last;
      for (int c = 0; c < d; ++c) {
        const std::size_t ic = at(i, c), jc = at(j, c);
        if (j % kStep == 0) big_dq[c] = std::fabs(e.dq[ic]);
        e.dv[jc] += pr.value * db[ic], big_dv[jc] = std::max(big_dv[jc], std::fabs(pr.value * db[ic]));
        e.dk[jc] += dr.value * qb[ic], big_dk[jc] = std::max(big_dk[jc], std::fabs(dr.value * qb[ic]));
        e.dq[ic] += dr.value * kb[jc], big_dq[c] = std::max(big_dq[c], std::fabs(dr.value * kb[jc]));
        // dQ's partial sums over blocks of keys are then added in fp32: one more rounding a step, at most.
        if (dq_step_ends) e.dq_moment.sums += scale * scale * (tc_step_var(big_dq[c]) + u2 * e.dq[ic] * e.dq[ic]);
      }
    }
    // dV and dK's steps over queries end every 16 rows of Q (and at the last): each key's element
    // then starts its next step from its accumulator.
    if (i % kStep == kStep - 1 || i == seq - 1)
      for (int j = 0; j < (causal ? i + 1 : seq); ++j)
        for (int c = 0; c < d; ++c) {
          const std::size_t jc = at(j, c);
          e.dv_moment.sums += tc_step_var(big_dv[jc]);
          e.dk_moment.sums += scale * scale * tc_step_var(big_dk[jc]);
          big_dv[jc] = std::fabs(e.dv[jc]), big_dk[jc] = std::fabs(e.dk[jc]);
        }
  }
  // dK and dQ's scale, last: its rounding and the product's.
  for (std::size_t i = 0; i < n; ++i) {
    e.dk[i] *= scale, e.dq[i] *= scale;
    e.dk_moment.sums += 2 * u2 * e.dk[i] * e.dk[i];
    e.dq_moment.sums += 2 * u2 * e.dq[i] * e.dq[i];
  }
  return e;
}

std::vector<int> ForwardSchedule::chunks_of(int row) const {
  if (query_tile > 0 && std::size_t(row / query_tile) < chunk_starts.size() && !chunk_starts[row / query_tile].empty())
    return chunk_starts[row / query_tile];
  return {0};
}

Bf16ForwardEmulation emulate_bf16_forward(const float* q, const float* k, const float* v, int seq, int d, bool causal,
                                          const ForwardSchedule& schedule) {
  const double scale = 1.0 / std::sqrt(double(d)), scale_log2 = scale * kLog2e;
  const std::size_t n = std::size_t(seq) * d;
  auto at = [d](int row, int c) { return std::size_t(row) * d + c; };
  std::vector<double> qb(n), kb(n), vb(n), v2(seq, 0.0);
  for (int r = 0; r < seq; ++r)
    for (int c = 0; c < d; ++c) {
      const std::size_t i = at(r, c);
      qb[i] = round_bf16(q[i]).value, kb[i] = round_bf16(k[i]).value, vb[i] = round_bf16(v[i]).value;
      v2[r] += vb[i] * vb[i];
    }
  Bf16ForwardEmulation e;
  e.o.assign(n, 0.0);
  // One row's keys: x = S scale log2 e and its variance; the maximum of its tile (then its factor
  // into O, below); P's rounding and variance; the chunk it is in.
  std::vector<double> x(seq), x_var(seq), factor(seq), p_var(seq);
  std::vector<Bf16Rounding> pr(seq);
  std::vector<int> chunk_of(seq);
  std::vector<double> acc(d), big(d), out(d), out_var(d);
  for (int i = 0; i < seq; ++i) {
    const int last = causal ? i : seq - 1;
    for (int j = 0; j <= last; ++j) {
      double sb = 0, sb_var = 0, sb_big = 0;
      for (int c = 0; c < d; ++c) {
        if (c % kStep == 0) sb_big = std::fabs(sb);
        const double t = qb[at(i, c)] * kb[at(j, c)];
        sb += t, sb_big = std::max(sb_big, std::fabs(t));
        if (c % kStep == kStep - 1 || c == d - 1) sb_var += tc_step_var(sb_big);
      }
      x[j] = sb * scale_log2;
      x_var[j] = scale_log2 * scale_log2 * sb_var + u2 * x[j] * x[j];  // S's sum, and scale log2 e's rounding
    }
    std::vector<int> starts = schedule.chunks_of(i);
    starts.push_back(last + 1);
    // Each chunk: its tiles' running max, P, its O_c (in out, weighted below) and lse_c.
    std::vector<double> lse_c, l_rel_var_c;
    std::vector<std::vector<double>> o_c, o_var_c;
    for (std::size_t c = 0; c + 1 < starts.size(); ++c) {
      const int first = starts[c], end = std::min(starts[c + 1], last + 1);
      if (first >= end) continue;
      double m = -std::numeric_limits<double>::infinity(), m_var = 0, l = 0, l_var = 0;
      std::fill(acc.begin(), acc.end(), 0.0), std::fill(out_var.begin(), out_var.end(), 0.0);
      int tiles = 0;
      for (int t0 = first; t0 < end; t0 += schedule.key_tile, ++tiles) {
        const int t1 = std::min(t0 + schedule.key_tile, end);
        double mx = m;
        for (int j = t0; j < t1; ++j)
          if (x[j] > mx) mx = x[j], m_var = x_var[j] + u2 * x[j] * x[j];  // fp32(max s * scale log2 e)
        const double alpha = std::exp2(m - mx);  // 0 on the first tile
        l *= alpha, l_var *= alpha * alpha;
        for (int c2 = 0; c2 < d; ++c2) acc[c2] *= alpha, out_var[c2] = out_var[c2] * alpha * alpha + u2 * acc[c2] * acc[c2];
        m = mx;
        for (int j = t0; j < t1; ++j) {
          const double a = x[j] - m, p = std::exp2(a);
          // x's error, the tile max's (common to the tile), the fma's rounding, ex2's.
          p_var[j] = p * p * (ln2 * ln2 * (x_var[j] + m_var + u2 * a * a) + ex2_var);
          pr[j] = round_bf16(p), factor[j] = m, chunk_of[j] = int(lse_c.size());
          l += p, l_var += p_var[j];
        }
        // P V on the tensor cores, steps of 16 keys from the tile's first.
        for (int c2 = 0; c2 < d; ++c2) {
          double b = std::fabs(acc[c2]);
          for (int j = t0; j < t1; ++j) {
            if ((j - t0) % kStep == 0 && j > t0) out_var[c2] += tc_step_var(b), b = std::fabs(acc[c2]);
            const double t = pr[j].value * vb[at(j, c2)];
            acc[c2] += t, b = std::max(b, std::fabs(t));
          }
          out_var[c2] += tc_step_var(b);
        }
      }
      // l relative: its terms' errors, and its fp32 roundings (each within u of l: the tile sums,
      // the lanes' shuffles and the rescales).
      const double l_rel_var = l_var / (l * l) + u2 * (double(end - first) + 2.0 * tiles + 4);
      std::vector<double> oc(d), ov(d);
      for (int c2 = 0; c2 < d; ++c2) {
        oc[c2] = acc[c2] / l;
        ov[c2] = out_var[c2] / (l * l) + 2 * u2 * oc[c2] * oc[c2];  // the sums; acc times 1 / l
      }
      lse_c.push_back((m + std::log2(l)) / kLog2e), l_rel_var_c.push_back(l_rel_var);
      o_c.push_back(std::move(oc)), o_var_c.push_back(std::move(ov));
      // The chunk's m and l, for its keys' factors below.
      for (int j = first; j < end; ++j) factor[j] = std::exp2(factor[j] - m) / l;
    }
    // The combine (the split step): weights exp(lse_c - max), O = sum_c w_c O_c / sum_c w_c, a few
    // fp32 roundings and one expf a chunk.
    const std::size_t chunks = lse_c.size();
    double top = -std::numeric_limits<double>::infinity(), wsum = 0;
    for (const double x0 : lse_c) top = std::max(top, x0);
    std::vector<double> w(chunks);
    for (std::size_t c = 0; c < chunks; ++c) w[c] = std::exp(lse_c[c] - top), wsum += w[c];
    for (int c2 = 0; c2 < d; ++c2) {
      double o = 0, var = 0;
      for (std::size_t c = 0; c < chunks; ++c) {
        const double share = w[c] / wsum, oc = o_c[c][c2];
        o += share * oc;
        var += share * share * (o_var_c[c][c2] + oc * oc * l_rel_var_c[c]);
      }
      if (chunks > 1) var += u2 * (chunks + 20.0) * (chunks + 20.0) * o * o;
      e.o[at(i, c2)] = o;
      e.o_moment.sums += var;
    }
    // The flips: key j's P moves O's row by its spacing times its factor (its tile's max against
    // the chunk's, over the chunk's sum, times the chunk's share) times V's row j.
    for (int j = 0; j <= last; ++j) {
      const double f = factor[j] * w[std::size_t(chunk_of[j])] / wsum;
      add_flip(e.o_moment, pr[j], p_var[j], f * f * v2[j]);
    }
  }
  return e;
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

// A bf16 output `what` against its emulation, normwise over every head (values: the heads'
// emulated values in order; model: theirs summed; see attn::emulate_bf16_backward). Fails `v` when
// it is not within its allowance; either way, notes how close it came.
void judge_emulated(lab::Verdict& v, const std::vector<float>& got, const std::vector<double>& values,
                    const attn::Bf16Moment& model, const char* what) {
  const attn::Bf16Distance r = attn::bf16_emulation_distance(got, values, model);
  std::ostringstream o;
  o.precision(3);
  o << what << "'s L2 distance from the bf16 emulation " << r.distance << ", " << r.share() << " of its allowance "
    << r.allowed;
  if (!r.pass()) {
    v.pass = false;
    if (v.reason.empty()) v.reason = o.str();
  }
  v.note = o.str();
}

// The schedule a bf16 forward declares (lab::Declared::schedule), which its emulation needs.
attn::ForwardSchedule schedule_of(const lab::Problem& p, const attn::Dims& a) {
  const auto& f = p.declared().schedule;
  const std::any s = f ? f(lab::Shape{a.batch, a.heads, a.seq, a.d, a.causal ? 1 : 0}) : std::any();
  if (const auto* sched = std::any_cast<attn::ForwardSchedule>(&s)) return *sched;
  throw lab::Error("attention: a bf16 forward must declare its schedule (lab::Declared::schedule returning an "
                   "attn::ForwardSchedule: the keys a tile of its online softmax), which the check emulates");
}

lab::Verdict Attention::Problem::verify() {
  const attn::Precision prec = precision_of(*this);
  const auto refs = references(*this, nullptr, prec);
  const lab::Tolerance tol = tolerance_for(prec);
  const auto got = o.download();
  const std::size_t per_head = std::size_t(dims.seq) * dims.d;
  lab::Verdict verdict = compare_heads(dims, got, [](const auto& r) { return Pair(r.o, r.o_slack); }, refs, tol, "O", per_head);
  // A bf16 forward is also held to its emulation, normwise (attn::emulate_bf16_forward).
  if (std::string(prec.name) == "bf16") {
    const attn::ForwardSchedule sched = schedule_of(*this, dims);
    const auto hq = q.download(), hk = k.download(), hv = v.download();
    std::vector<double> values;
    attn::Bf16Moment model;
    for (int h = 0; h < dims.bh(); ++h) {
      const std::size_t at = std::size_t(h) * per_head;
      attn::Bf16ForwardEmulation e = attn::emulate_bf16_forward(hq.data() + at, hk.data() + at, hv.data() + at,
                                                                dims.seq, dims.d, dims.causal, sched);
      values.insert(values.end(), e.o.begin(), e.o.end());
      model += e.o_moment;
    }
    judge_emulated(verdict, got, values, model, "O");
  }
  if (declared().writes_output("lse"))
    verdict.also(compare_heads(dims, lse.download(), [](const auto& r) { return Pair(r.lse, r.lse_slack); }, refs, tol,
                         "lse", std::size_t(dims.seq)));
  return verdict;
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
  // The bf16 backward is also held to its emulation, normwise (attn::emulate_bf16_backward).
  std::vector<attn::Bf16Emulation> emulated;
  if (std::string(prec.name) == "bf16") {
    const auto hq = q.download(), hk = k.download(), hv = v.download();
    for (int h = 0; h < dims.bh(); ++h) {
      const std::size_t at = std::size_t(h) * per_head;
      emulated.push_back(attn::emulate_bf16_backward(hq.data() + at, hk.data() + at, hv.data() + at,
                                                     hdout.data() + at, dims.seq, dims.d, dims.causal));
    }
  }
  auto one = [&](const lab::DeviceBuffer<float>& out, auto pick, std::vector<double> attn::Bf16Emulation::*emu,
                 attn::Bf16Moment attn::Bf16Emulation::*moment, const char* what) {
    const auto got = out.download();
    lab::Verdict v = compare_heads(dims, got, pick, refs, tol, what, per_head);
    if (!emulated.empty()) {
      std::vector<double> values;
      attn::Bf16Moment model;
      for (const auto& e : emulated) values.insert(values.end(), (e.*emu).begin(), (e.*emu).end()), model += e.*moment;
      judge_emulated(v, got, values, model, what);
    }
    return v;
  };
  // With one key, P = 1 whatever the scores: dQ and dK are identically zero, checked so.
  using E = attn::Bf16Emulation;
  lab::Verdict v = one(dv, [](const auto& r) { return Pair(r.dv, r.dv_slack); }, &E::dv, &E::dv_moment, "dV");
  v.also(one(dq, [](const auto& r) { return Pair(r.dq, r.dq_slack); }, &E::dq, &E::dq_moment, "dQ"));
  return v.also(one(dk, [](const auto& r) { return Pair(r.dk, r.dk_slack); }, &E::dk, &E::dk_moment, "dK"));
}
