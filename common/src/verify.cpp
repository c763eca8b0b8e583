#include "lab/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "lab/check.hpp"

namespace lab {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

template <class G, class R>
Verdict compare_impl(std::span<const G> got, std::span<const R> ref, Tolerance tol, std::string what,
                     std::vector<std::int64_t> dims, std::span<const double> slack = {}) {
  if (got.size() != ref.size())
    throw Error("compare(" + what + "): result has " + std::to_string(got.size()) + " elements, reference " +
                std::to_string(ref.size()));
  if (!slack.empty() && slack.size() != ref.size())
    throw Error("compare(" + what + "): slack has " + std::to_string(slack.size()) + " elements, reference " +
                std::to_string(ref.size()));
  Verdict v;
  v.what = std::move(what);
  v.dims = std::move(dims);
  v.tol = tol;
  v.count = got.size();
  v.conditioned = !slack.empty();
  double diff2 = 0, ref2 = 0, slack2 = 0;
  bool slack_bad = false;
  bool ref_nonfinite = false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    const double r = static_cast<double>(ref[i]);
    bool bad = false;
    if (std::isnan(g)) {
      ++v.nan;
      bad = true;
    } else if (std::isinf(g)) {
      ++v.inf;
      bad = true;
    }
    if (!std::isfinite(r)) {
      ref_nonfinite = true;
      bad = true;
    }
    double e = 0;  // this element's slack
    if (!slack.empty()) {
      e = slack[i];
      if (!(e >= 0) || !std::isfinite(e)) {
        slack_bad = true;
        e = 0;
      }
      slack2 += e * e;
    }
    if (!bad) {
      const double d = std::fabs(g - r);
      if (d > v.max_abs) {
        v.max_abs = d;
        v.worst_index = i;
      }
      if (r != 0) v.max_rel = std::max(v.max_rel, d / std::fabs(r));
      diff2 += d * d;
      const double bound = tol.atol + tol.rtol * std::fabs(r) + e;
      if (d > 0) v.worst_share = std::max(v.worst_share, bound > 0 ? d / bound : INFINITY);
      if (d > bound) bad = true;
    }
    if (std::isfinite(r)) ref2 += r * r;
    if (bad) {
      ++v.bad;
      if (v.first.size() < kMismatchesKept) v.first.push_back({i, g, r});
    }
  }
  v.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0.0);
  v.zero_reference = v.count > 0 && !ref_nonfinite && ref2 == 0;
  // The whole-output bound, in the units of the output: max_rel_l2 ||ref|| plus the slack's norm.
  const double l2_bound = tol.max_rel_l2 * std::sqrt(ref2) + std::sqrt(slack2);
  if (v.count == 0) {
    v.reason = "nothing to compare (empty output)";
  } else if (ref_nonfinite) {
    v.reason = "the reference itself has NaN or Inf: fix the reference or the inputs";
  } else if (slack_bad) {
    v.reason = "the reference's slack has a negative, NaN or Inf element: fix the reference";
  } else if (v.nan || v.inf) {
    v.reason = std::to_string(v.nan) + " NaN and " + std::to_string(v.inf) + " Inf in the result (" +
               std::to_string(v.bad) + " of " + std::to_string(v.count) + " elements bad; NaN marks elements never written)";
  } else if (v.bad) {
    v.reason = std::to_string(v.bad) + " of " + std::to_string(v.count) + " elements outside |got - ref| <= " +
               num(tol.atol) + " + " + num(tol.rtol) + " * |ref|" + (v.conditioned ? " + slack" : "") +
               (v.zero_reference ? " (the reference is identically zero)" : "");
  } else if (!v.zero_reference && std::sqrt(diff2) > l2_bound) {
    // An identically zero reference has no relative L2 error; its elements were held above.
    v.reason = "relative L2 error " + num(v.rel_l2) + " above " + num(tol.max_rel_l2) +
               (v.conditioned ? " + the slack's (" + num(l2_bound / std::sqrt(ref2)) + " in all)" : "");
  }
  v.pass = v.reason.empty();
  return v;
}

}  // namespace

std::string Verdict::index_text(std::size_t flat) const {
  if (dims.empty()) return std::string("[").append(std::to_string(flat)).append("]");
  std::vector<std::int64_t> c(dims.size());
  std::size_t rest = flat;
  for (std::size_t k = dims.size(); k-- > 0;) {
    const auto e = static_cast<std::size_t>(std::max<std::int64_t>(dims[k], 1));
    c[k] = static_cast<std::int64_t>(rest % e);
    rest /= e;
  }
  std::string s = "[";
  for (std::size_t k = 0; k < c.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(c[k]);
  }
  return s + "]";
}

namespace fp32 {

double sum_error(double n, double u) {
  if (!(n >= 1)) n = 1;
  const double deterministic = n * u < 1 ? n * u / (1 - n * u) : INFINITY;
  const double probabilistic = std::expm1(kLambda * std::sqrt(n) * u + n * u * u / (1 - u));
  return std::min(deterministic, probabilistic);
}

}  // namespace fp32

std::string Verdict::summary() const {
  std::ostringstream o;
  o << (pass ? "PASS" : "FAIL") << " " << what << ": max_abs " << num(max_abs) << ", max_rel " << num(max_rel)
    << ", rel_l2 " << num(rel_l2) << " (" << tol.name << " tolerance" << (conditioned ? " + conditioning" : "")
    << (zero_reference ? "; zero reference" : "")
    << (zero_reference || zero_parts.empty() ? "" : "; " + zero_parts + ": zero reference, not in rel_l2") << ")";
  if (pass && count > 0) o << ", worst element at " << num(worst_share) << " of its bound";
  if (!pass) o << ": " << reason;
  if (!note.empty() && note != reason) o << "; " << note;
  return o.str();
}

std::string Verdict::details() const {
  std::ostringstream o;
  o << summary();
  for (const auto& m : first)
    o << "\n    " << what << index_text(m.index) << ": got " << num(m.got) << ", expected " << num(m.expected);
  if (bad > first.size()) o << "\n    ... and " << (bad - first.size()) << " more";
  return o.str();
}

Verdict& Verdict::also(const Verdict& o) {
  // The first failing output's mismatches, reason, shape and tolerance are the ones reported.
  Verdict r = (pass && !o.pass) ? o : *this;
  r.what = what + "+" + o.what;
  r.pass = pass && o.pass;
  r.count = count + o.count;
  r.bad = bad + o.bad;
  r.nan = nan + o.nan;
  r.inf = inf + o.inf;
  r.max_abs = std::max(max_abs, o.max_abs);
  r.max_rel = std::max(max_rel, o.max_rel);
  // rel_l2 over the parts whose reference is not identically zero (all of them when every one is).
  r.rel_l2 = zero_reference == o.zero_reference ? std::max(rel_l2, o.rel_l2) : zero_reference ? o.rel_l2 : rel_l2;
  r.worst_share = std::max(worst_share, o.worst_share);
  r.conditioned = conditioned || o.conditioned;
  r.zero_reference = zero_reference && o.zero_reference;
  const auto zero_of = [](const Verdict& v) { return v.zero_reference ? v.what : v.zero_parts; };
  const std::string mine = zero_of(*this), theirs = zero_of(o);
  r.zero_parts = r.zero_reference ? "" : mine.empty() ? theirs : theirs.empty() ? mine : mine + "+" + theirs;
  r.note = note.empty() ? o.note : o.note.empty() ? note : note + "; " + o.note;
  *this = std::move(r);
  return *this;
}

Verdict compare(std::span<const float> got, std::span<const double> ref, Tolerance tol, std::string what,
                std::vector<std::int64_t> dims, std::span<const double> slack) {
  return compare_impl(got, ref, tol, std::move(what), std::move(dims), slack);
}
Verdict compare(std::span<const double> got, std::span<const double> ref, Tolerance tol, std::string what,
                std::vector<std::int64_t> dims, std::span<const double> slack) {
  return compare_impl(got, ref, tol, std::move(what), std::move(dims), slack);
}
Verdict compare(std::span<const std::int32_t> got, std::span<const std::int32_t> ref, std::string what,
                std::vector<std::int64_t> dims) {
  return compare_impl(got, ref, Tolerance::exact(), std::move(what), std::move(dims));
}

}  // namespace lab
