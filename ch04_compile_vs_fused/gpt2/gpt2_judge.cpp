// How a step's outputs are judged against the model's reference (gpt2_reference.cpp): every element
// within k sigma of the Monte Carlo runs' spread, k from Student's t for the number of runs and the
// false-alarm rate asked (element_factor), and each tensor's L2 error within a factor of the largest
// run's where it has enough degrees of freedom (l2_dof); and the reference's training curve
// (train_reference), which the 200-step training test holds the steps to.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt2/gpt2_model.hpp"
#include "lab/verify.hpp"

namespace gpt2 {

namespace {

template <class F>
void for_outputs(F&& f) {
  f("grads", &Outputs<double>::grads, &Expected::grads_l2, &Expected::stand_in_grads_l2, &Expected::freedom_grads_l2);
  f("params", &Outputs<double>::params, &Expected::params_l2, &Expected::stand_in_params_l2,
    &Expected::freedom_params_l2);
  f("m", &Outputs<double>::m, &Expected::m_l2, &Expected::stand_in_m_l2, &Expected::freedom_m_l2);
  f("v", &Outputs<double>::v, &Expected::v_l2, &Expected::stand_in_v_l2, &Expected::freedom_v_l2);
}

}  // namespace

double element_k(int runs) {
  static const double k_default = element_factor(kMonteCarloRuns, kElementFalseAlarm);  // once
  return runs == kMonteCarloRuns ? k_default : element_factor(runs, kElementFalseAlarm);
}

lab::Verdict judge(const Expected& e, const Config& c, float loss, std::span<const float> grads,
                   std::span<const float> params, std::span<const float> m, std::span<const float> v,
                   SamePrecision same_precision) {
  const double k = element_k(e.runs);
  const bool enforce = same_precision == SamePrecision::enforce;
  // The same-precision test's tensor nearest its bound: the L2 error over the bound.
  double worst_ratio = -1;
  std::string worst_tensor;
  // The L2 test's (kL2Factor x the runs' largest), over the tensors steady enough to take it.
  double worst_l2 = -1;
  std::string worst_l2_tensor;
  const auto tensors = layout(c);
  auto per_element = lab::Tolerance::per_element(0, 0, "the declared arithmetic's rounding, Monte Carlo");
  // One tensor: every element within k sigma (and the optimizer's outputs within their
  // curvature beyond it), and where the tensor's error has kL2MinDof degrees of freedom, its L2
  // error within kL2Factor times the largest of the runs'.
  // stand_in_l2: the same-precision stand-in's L2 distance (negative where there is none);
  // freedom_l2: fp32's freedom around it (Expected::freedom_*).
  auto one = [&](std::string what, std::span<const float> got, std::span<const double> ref,
                 std::span<const double> sigma, std::span<const double> curvature, double l2_allowed,
                 double stand_in_l2 = -1, double freedom_l2 = 0) {
    std::vector<double> slack(sigma.size());
    for (std::size_t i = 0; i < sigma.size(); ++i) slack[i] = k * sigma[i] + (curvature.empty() ? 0 : curvature[i]);
    auto [verdict, l2_ratio, l2_error] =
        lab::mc::judge_output(what, got, ref, sigma, slack, l2_allowed, e.runs, kL2Factor, kL2MinDof, per_element);
    const bool steady = l2_ratio >= 0;
    if (steady && l2_ratio > worst_l2) worst_l2 = l2_ratio, worst_l2_tensor = what;
    if (stand_in_l2 >= 0 && steady) {
      double ref_sq = 0;
      for (std::size_t i = 0; i < got.size(); ++i) ref_sq += ref[i] * ref[i];
      const double bound = kSamePrecisionFactor * (stand_in_l2 + freedom_l2) + kSamePrecisionFloor * std::sqrt(ref_sq);
      const double ratio = bound > 0 ? l2_error / bound : (l2_error > 0 ? INFINITY : 0);
      if (ratio > worst_ratio) worst_ratio = ratio, worst_tensor = what;
      if (enforce && verdict.pass && !(ratio <= 1)) {
        verdict.pass = false;
        std::ostringstream why;
        why << what << ": L2 error " << l2_error << " above " << kSamePrecisionFactor << " x (" << stand_in_l2
            << " (the same-precision stand-in's) + " << freedom_l2 << " (fp32's freedom around it)) + "
            << kSamePrecisionFloor << " x the reference's norm";
        verdict.reason = why.str();
      }
    }
    return verdict;
  };
  // Hundreds of outputs are judged (four per tensor): a failure is reported as the first output
  // that fails, its own errors and elements (not the largest over every output, which would print
  // a gradient's relative error near a zero reference under the loss's name), and its reason lists
  // the others that fail, so a failure reads as one tensor. A pass reports the largest errors of all.
  std::vector<std::string> failing;
  std::size_t judged = 0;
  lab::Verdict all, first_failing;
  auto add = [&](const lab::Verdict& v) {
    if (!v.pass && failing.empty()) first_failing = v;
    if (!v.pass) failing.push_back(v.what);
    if (judged++ == 0) all = v; else all.also(v);
  };
  const double ref_loss = e.ref.loss, sigma_loss = e.sigma.loss;
  add(one("loss", {&loss, 1}, {&ref_loss, 1}, {&sigma_loss, 1}, {}, e.loss_l2));
  const std::span<const float> got[] = {grads, params, m, v};
  std::vector<std::string> kinds;
  int which = 0;
  for_outputs([&](const char* name, std::vector<double> Outputs<double>::*out, std::vector<double> Expected::*l2,
                  std::vector<double> Expected::*stand_in, std::vector<double> Expected::*freedom) {
    const std::span<const float> g = got[which++];
    const std::vector<double>& ref = e.ref.*out;
    if (ref.empty()) return;
    if (g.size() != ref.size()) throw std::invalid_argument(std::string("gpt2::judge: ") + name + " has the wrong size");
    kinds.emplace_back(name);
    const std::vector<double>& bend = e.curvature.*out;
    if (!bend.empty() && bend.size() != ref.size())
      throw std::invalid_argument(std::string("gpt2::judge: the curvature of ") + name + " has the wrong size");
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const auto& x = tensors[t];
      add(one(std::string(name) + " " + x.name, g.subspan(x.offset, x.size),
              std::span<const double>(ref).subspan(x.offset, x.size),
              std::span<const double>((e.sigma.*out)).subspan(x.offset, x.size),
              bend.empty() ? std::span<const double>() : std::span<const double>(bend).subspan(x.offset, x.size),
              (e.*l2)[t], e.same_precision && !(e.*stand_in).empty() ? (e.*stand_in)[t] : -1,
              (e.*freedom).size() == tensors.size() ? (e.*freedom)[t] : 0));
    }
  });
  if (failing.empty()) {
    std::ostringstream w;
    w << "loss";
    for (const auto& k : kinds) w << ", " << k;
    if (!kinds.empty()) w << " (" << tensors.size() << " tensors each)";
    all.what = w.str();
  } else {
    std::string notes = std::move(all.note);
    all = std::move(first_failing);
    all.note = std::move(notes);
    std::ostringstream why;
    why << all.reason << "; " << failing.size() << " of " << judged << " outputs fail";
    const std::size_t named = std::min<std::size_t>(failing.size(), 6);
    for (std::size_t i = 0; i < named; ++i) why << (i ? ", " : ": ") << failing[i];
    if (failing.size() > named) why << " and " << failing.size() - named << " more";
    all.reason = why.str();
  }
  if (worst_l2 >= 0) {  // printed with the verdict, pass or fail: how near the L2 test came to failing
    std::ostringstream note;
    note << std::setprecision(3) << "the L2 test: at most " << worst_l2 << " of " << kL2Factor << " x the largest of "
         << e.runs << " Monte Carlo runs' L2 error (" << worst_l2_tensor << ")";
    all.note = all.note.empty() ? note.str() : all.note + "; " + note.str();
  }
  if (worst_ratio >= 0) {  // printed with the verdict, pass or fail
    std::ostringstream note;
    note << std::setprecision(3) << "same precision " << (enforce ? "(enforced)" : "(reported)") << ": L2 error at most "
         << worst_ratio << " of " << kSamePrecisionFactor << " x (the stand-in's + fp32's freedom) + floor ("
         << worst_tensor << ")";
    all.note = all.note.empty() ? note.str() : all.note + "; " + note.str();
  }
  return all;
}

template <class T>
std::vector<double> train_reference(const Config& c, std::span<const float> params, std::span<const std::int32_t> corpus,
                                    int steps, const AdamW& hp) {
  std::vector<float> p(params.begin(), params.end()), m(p.size(), 0.f), v(p.size(), 0.f);
  std::vector<std::int32_t> tokens, targets;
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    corpus_batch(corpus, c, s, tokens, targets);
    const Outputs<T> out = reference<T>(c, Phase::step, p, tokens, targets, {m, v, s + 1}, hp);
    losses.push_back(double(out.loss));
    for (std::size_t i = 0; i < p.size(); ++i)
      p[i] = float(out.params[i]), m[i] = float(out.m[i]), v[i] = float(out.v[i]);
  }
  return losses;
}
template std::vector<double> train_reference<double>(const Config&, std::span<const float>,
                                                     std::span<const std::int32_t>, int, const AdamW&);
template std::vector<double> train_reference<float>(const Config&, std::span<const float>,
                                                    std::span<const std::int32_t>, int, const AdamW&);

}  // namespace gpt2
