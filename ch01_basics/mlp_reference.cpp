// The MLP's training on the CPU, over a scalar type, and the check of the GPU's (mlp_reference.hpp).
//
// fp32 training against double is chaotic at the ReLU's kink: a hidden unit whose pre-activation
// is within rounding of zero goes one way in fp32 and the other in double, and its input weights
// then differ by lr x its gradient, far more than the rounding that caused it (seen on an H100:
// one flip in a 7-sample batch moved the weights by 1.2e-4 of their norm). A check that allows
// every weight that much is blind to a 1% error in most of them (until 2026-12-05 this one held the
// weights to a relative L2 of 1e-4 and each to 1% of the largest weight: a 1% error in a weight
// below the largest's tenth passed). So the Monte Carlo runs take such decisions both ways: each
// run perturbs every operation by fp32's rounding, and where a pre-activation lies within the
// rounding's reach of zero (tau, below), the run decides the ReLU by a code drawn for that decision,
// half the runs one way and half the other. Each weight's sigma then holds what the flips that
// fp32 can make do to it, to that weight and downstream, and nothing more where no flip reaches.
#include "mlp_reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace mlp {

using lab::mc::Perturbed;
using lab::mc::value;

Data make_data(int samples, lab::Rng& rng) {
  Data d;
  d.samples = samples;
  d.x.resize(std::size_t(samples) * kIn);
  d.labels.resize(std::size_t(samples));
  d.params0.resize(kParams);
  rng.normal(std::span<float>(d.x));
  std::vector<float> teacher(std::size_t(kIn) * kClasses);
  rng.normal(std::span<float>(teacher));
  for (int r = 0; r < samples; ++r) {
    int best = 0;
    double best_v = -INFINITY;
    for (int j = 0; j < kClasses; ++j) {
      double v = 0;
      for (int i = 0; i < kIn; ++i) v += double(d.x[std::size_t(r) * kIn + i]) * teacher[std::size_t(i) * kClasses + j];
      if (v > best_v) best_v = v, best = j;
    }
    d.labels[std::size_t(r)] = best;
  }
  const float s1 = 1.f / std::sqrt(float(kIn)), s2 = 1.f / std::sqrt(float(kHidden));
  rng.uniform(std::span<float>(d.params0.data() + kW1, std::size_t(kIn) * kHidden), -s1, s1);
  rng.uniform(std::span<float>(d.params0.data() + kB1, kHidden), -0.01f, 0.01f);
  rng.uniform(std::span<float>(d.params0.data() + kW2, std::size_t(kHidden) * kClasses), -s2, s2);
  rng.uniform(std::span<float>(d.params0.data() + kB2, kClasses), -0.01f, 0.01f);
  return d;
}

std::vector<Tensor> tensors() {
  return {{"W1", kW1, std::size_t(kIn) * kHidden},
          {"b1", kB1, kHidden},
          {"W2", kW2, std::size_t(kHidden) * kClasses},
          {"b2", kB2, kClasses}};
}

namespace {

// A Monte Carlo run's decision at the kink: decision (step t, sample r, unit c) has a code in 1 to
// 15, and run `run` takes it active when run & code has an odd number of bits. Over 16 runs every
// code is odd in exactly 8 and two different codes' patterns are orthogonal (Walsh functions), so
// each decision goes both ways equally often, and two decisions of different codes every way
// together (two of one code go together: among the decisions at the kink a check meets, 0 to 5
// at the check shapes in 110 CPU runs, up to 21 at 1024x16384, some do).
bool kink_active(int run, int t, int r, int c) {
  const std::uint64_t key = (std::uint64_t(t) << 42) ^ (std::uint64_t(r) << 21) ^ std::uint64_t(c);
  const int code = 1 + int(lab::rng_detail::mix64(key + 0x9e3779b97f4a7c15ull) % 15);
  return std::popcount(unsigned(run & code)) % 2 == 1;
}

}  // namespace

template <class T>
Trained<T> train(const Data& data, int batch, int steps, Kink kink, int run) {
  using lab::mc::exp_;
  using lab::mc::log_;
  using lab::mc::max_;
  constexpr double u = lab::fp32::kUnitRoundoff;
  if (batch < 1 || steps < 0 || std::size_t(batch) * std::size_t(steps) > std::size_t(data.samples))
    throw std::invalid_argument("mlp::train: batch x steps beyond the data's samples");
  Trained<T> out;
  out.params.assign(data.params0.begin(), data.params0.end());
  out.losses.assign(std::size_t(steps), T(0.0));
  std::vector<T>& p = out.params;
  const T lr = T(double(kLearningRate)), rows = T(double(batch));  // exact in fp32 and double
  std::vector<T> h(std::size_t(batch) * kHidden), dl(std::size_t(batch) * kClasses), dh(h.size()), g(kParams);
  std::vector<char> active(h.size());
  std::vector<double> sq(kHidden);
  for (int t = 0; t < steps; ++t) {
    const float* x = data.x.data() + std::size_t(t) * batch * kIn;
    const int* y = data.labels.data() + std::size_t(t) * batch;
    T loss = T(0.0);
    for (int r = 0; r < batch; ++r) {
      // h = x W1 (a product of kIn terms), then + b1, as the GPU's GEMM and bias kernel do.
      T* hr = &h[std::size_t(r) * kHidden];
      std::fill(hr, hr + kHidden, T(0.0));
      for (int c = 0; c < kHidden; ++c) sq[c] = value(p[kB1 + c]) * value(p[kB1 + c]);
      for (int i = 0; i < kIn; ++i) {
        const T xi = T(x[std::size_t(r) * kIn + i]);
        const T* w = &p[kW1 + std::size_t(i) * kHidden];
        for (int c = 0; c < kHidden; ++c) {
          hr[c] = hr[c] + xi * w[c];
          const double xw = value(xi) * value(w[c]);
          sq[c] += xw * xw;
        }
      }
      // The pre-activation in fp32 errs by the rounding of its kIn + 1 terms' sum, a random walk
      // of that many steps of up to u times a partial sum (about the terms' L2 norm), and by the
      // weights' own fp32 drift after t steps, a walk of t such steps: within 6 sigma of both,
      // tau. Closer to zero than tau, fp32 may take the ReLU either way: a Monte Carlo run takes it
      // by its code (Kink::both_ways, kink_active); the reference as its value says.
      for (int c = 0; c < kHidden; ++c) {
        hr[c] = hr[c] + p[kB1 + c];
        const double tau = 6 * u * (std::sqrt(kIn + 1.0) + std::sqrt(double(t))) * std::sqrt(sq[c]);
        bool on = value(hr[c]) > 0;
        if (std::fabs(value(hr[c])) <= tau) {
          ++out.kink_decisions;
          if (kink == Kink::both_ways) on = kink_active(run, t, r, c);
          if (kink == Kink::other_way) on = !on;
        }
        active[std::size_t(r) * kHidden + c] = on;
        // A unit taken active with a value at or below zero passes that value's size (within tau).
        hr[c] = !on ? T(0.0) : value(hr[c]) > 0 ? hr[c] : T(0.0) - hr[c];
      }
      // z = h W2 + b2; the loss and dlogits = (softmax - onehot) / batch, as the GPU's kernel.
      T z[kClasses], e[kClasses];
      T m = T(-INFINITY);
      for (int j = 0; j < kClasses; ++j) {
        T s = T(0.0);
        for (int c = 0; c < kHidden; ++c) s = s + hr[c] * p[kW2 + std::size_t(c) * kClasses + j];
        z[j] = s + p[kB2 + j];
        m = max_(m, z[j]);
      }
      T sum = T(0.0);
      for (int j = 0; j < kClasses; ++j) e[j] = exp_(z[j] - m), sum = sum + e[j];
      loss = loss + ((log_(sum) + m) - z[y[r]]);
      for (int j = 0; j < kClasses; ++j)
        dl[std::size_t(r) * kClasses + j] = (e[j] / sum - T(j == y[r] ? 1.0 : 0.0)) / rows;
    }
    out.losses[std::size_t(t)] = loss / rows;
    // The backward's products: dW2 = h^T dl, dh = (dl W2^T) masked, dW1 = x^T dh; the biases'
    // gradients the columns' sums. Each a sum over the batch, in the batch's order.
    std::fill(g.begin(), g.end(), T(0.0));
    for (int r = 0; r < batch; ++r) {
      const T* hr = &h[std::size_t(r) * kHidden];
      const T* dlr = &dl[std::size_t(r) * kClasses];
      T* dhr = &dh[std::size_t(r) * kHidden];
      for (int c = 0; c < kHidden; ++c) {
        T acc = T(0.0);
        for (int j = 0; j < kClasses; ++j) {
          T& gw = g[kW2 + std::size_t(c) * kClasses + j];
          gw = gw + hr[c] * dlr[j];
          acc = acc + dlr[j] * p[kW2 + std::size_t(c) * kClasses + j];
        }
        dhr[c] = active[std::size_t(r) * kHidden + c] ? acc : T(0.0);
      }
      for (int j = 0; j < kClasses; ++j) g[kB2 + j] = g[kB2 + j] + dlr[j];
      for (int c = 0; c < kHidden; ++c) g[kB1 + c] = g[kB1 + c] + dhr[c];
      for (int i = 0; i < kIn; ++i) {
        const T xi = T(x[std::size_t(r) * kIn + i]);
        T* gw = &g[kW1 + std::size_t(i) * kHidden];
        for (int c = 0; c < kHidden; ++c) gw[c] = gw[c] + xi * dhr[c];
      }
    }
    for (std::size_t i = 0; i < kParams; ++i) p[i] = p[i] - lr * g[i];
  }
  return out;
}

template Trained<double> train<double>(const Data&, int, int, Kink, int);
template Trained<float> train<float>(const Data&, int, int, Kink, int);
template Trained<Perturbed> train<Perturbed>(const Data&, int, int, Kink, int);

Expected expected(const Data& data, int batch, int steps, int runs, std::uint64_t seed, Kink kink) {
  if (runs < 2) throw std::invalid_argument("mlp::expected: at least two Monte Carlo runs");
  Expected e;
  e.runs = runs;
  e.kinks_both_ways = kink == Kink::both_ways;
  const auto ts = tensors();
  // Task 0 is the reference, task 1 + r Monte Carlo run r; a wave of `threads` at a time, folded in
  // in this order (the same sums whatever the number of threads).
  const int tasks = 1 + runs, wave = lab::mc::reference_threads(tasks);
  std::vector<Trained<Perturbed>> done(static_cast<std::size_t>(wave));
  Trained<double> ref;
  std::vector<double> sq_losses;
  e.params_sigma.assign(kParams, 0.0);
  e.losses_sigma.assign(std::size_t(steps), 0.0);
  e.params_l2.assign(ts.size(), 0.0);
  for (int first = 0; first < tasks; first += wave) {
    const int last = std::min(tasks, first + wave);
    lab::mc::run_tasks(first, last, wave, [&](int i) {
      if (i == 0) {
        ref = train<double>(data, batch, steps);
        return;
      }
      lab::mc::mc_state = lab::mc::stream_start(seed, i - 1);
      done[std::size_t(i - first)] = train<Perturbed>(data, batch, steps, kink, i - 1);
    });
    if (first == 0) e.params = ref.params, e.losses = ref.losses, e.kink_decisions = ref.kink_decisions;
    for (int i = std::max(first, 1); i < last; ++i) {
      const Trained<Perturbed> run = std::move(done[std::size_t(i - first)]);
      for (std::size_t t = 0; t < ts.size(); ++t) {
        double l2 = 0;
        for (std::size_t k = ts[t].offset; k < ts[t].offset + ts[t].size; ++k) {
          const double d = run.params[k].v - e.params[k];
          e.params_sigma[k] += d * d / runs;
          l2 += d * d;
        }
        e.params_l2[t] = std::max(e.params_l2[t], std::sqrt(l2));
      }
      double l2 = 0;
      for (std::size_t k = 0; k < e.losses.size(); ++k) {
        const double d = run.losses[k].v - e.losses[k];
        e.losses_sigma[k] += d * d / runs;
        l2 += d * d;
      }
      e.losses_l2 = std::max(e.losses_l2, std::sqrt(l2));
    }
  }
  for (double& s : e.params_sigma) s = std::sqrt(s);
  for (double& s : e.losses_sigma) s = std::sqrt(s);
  return e;
}

lab::Verdict judge(const Expected& e, std::span<const float> params, std::span<const float> losses) {
  if (params.size() != e.params.size() || losses.size() != e.losses.size())
    throw std::invalid_argument("mlp::judge: the outputs' sizes are not the reference's");
  const double k = lab::mc::element_factor(e.runs, kElementFalseAlarm);
  const auto per_element = lab::Tolerance::per_element(0, 0, "fp32 training, Monte Carlo");
  double worst_l2 = -1;
  std::string worst_l2_what, failing;
  // One output: every element within k sigma; with the degrees of freedom for it, the L2 error
  // within kL2Factor times the runs' largest (lab::mc::judge_output).
  auto one = [&](const std::string& what, std::span<const float> got, std::span<const double> ref,
                 std::span<const double> sigma, double l2_allowed) {
    std::vector<double> slack(sigma.size());
    for (std::size_t i = 0; i < sigma.size(); ++i) slack[i] = k * sigma[i];
    const lab::mc::OutputVerdict o =
        lab::mc::judge_output(what, got, ref, sigma, slack, l2_allowed, e.runs, kL2Factor, kL2MinDof, per_element);
    if (o.l2_ratio > worst_l2) worst_l2 = o.l2_ratio, worst_l2_what = what;
    if (!o.verdict.pass) failing += (failing.empty() ? "" : ", ") + what;
    return o.verdict;
  };
  lab::Verdict all;
  bool first = true, failed = false;
  lab::Verdict first_failing;
  auto add = [&](const lab::Verdict& v) {
    if (!v.pass && !failed) first_failing = v, failed = true;
    if (first) all = v, first = false;
    else all.also(v);
  };
  const auto ts = tensors();
  for (std::size_t i = 0; i < ts.size(); ++i)
    add(one(ts[i].name, params.subspan(ts[i].offset, ts[i].size),
            std::span<const double>(e.params).subspan(ts[i].offset, ts[i].size),
            std::span<const double>(e.params_sigma).subspan(ts[i].offset, ts[i].size), e.params_l2[i]));
  add(one("losses", losses, e.losses, e.losses_sigma, e.losses_l2));
  std::ostringstream note;
  note << std::setprecision(3) << "each element within " << k << " sigma of " << e.runs << " Monte Carlo runs";
  if (e.kink_decisions)
    note << " (" << e.kink_decisions << " ReLU decision" << (e.kink_decisions == 1 ? "" : "s")
         << " within rounding of the kink, " << (e.kinks_both_ways ? "taken both ways)" : "taken as computed)");
  if (worst_l2 >= 0) note << "; the L2 test: at most " << worst_l2 << " of " << kL2Factor << " x the runs' largest (" << worst_l2_what << ")";
  if (failed) {
    first_failing.what = "weights and losses";
    first_failing.reason = (first_failing.reason.empty() ? "" : first_failing.reason + "; ") + "failing: " + failing;
    first_failing.note = note.str();
    return first_failing;
  }
  all.what = "weights (W1, b1, W2, b2) and losses";
  all.note = note.str();
  return all;
}

}  // namespace mlp
