// From samples to rows: each pair's medians, speedup, intervals, U test, verdict and bound, and
// each chapter's geometric mean.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "compare.hpp"
#include "lab/contract.hpp"
#include "lab/harness.hpp"
#include "lab/stats.hpp"

namespace compare {

std::vector<std::vector<double>> sample_groups(const Cell& c) {
  if (c.rounds.size() != c.samples.size()) return {c.samples};
  std::map<int, std::vector<double>> by_round;
  for (std::size_t i = 0; i < c.samples.size(); ++i) by_round[c.rounds[i]].push_back(c.samples[i]);
  std::vector<std::vector<double>> out;
  for (auto& [round, v] : by_round) out.push_back(std::move(v));
  return out;
}

std::string verdict_for(double speedup, double lo, double hi, double p) {
  if (!(speedup > 0) || std::isnan(lo) || std::isnan(hi) || std::isnan(p)) return "NOISY";
  const bool significant = p < 0.05 && (lo > 1.0 || hi < 1.0);
  if (significant && speedup >= 1.02) return "FASTER";
  if (significant && speedup <= 1.0 / 1.02) return "SLOWER";
  if (lo >= 1.0 / 1.05 && hi <= 1.05) return "SAME";
  return "NOISY";
}

namespace {

const Cell* cell(const ProgramResult& pr, const std::string& shape) {
  auto it = pr.shapes.find(shape);
  return it == pr.shapes.end() ? nullptr : &it->second;
}

// Why a side has no usable samples at a shape, or "" when it has.
std::string unusable(const ProgramResult& pr, const std::string& shape, Status& status) {
  if (pr.status != Status::ok) {
    status = pr.status;
    return pr.program->name + ": " + pr.message;
  }
  const Cell* c = cell(pr, shape);
  if (!c) {
    status = Status::bad_output;
    return pr.program->name + ": no result for " + shape;
  }
  if (c->status != Status::ok) {
    status = c->status;
    return pr.program->name + ": " + c->message;
  }
  if (c->samples.empty()) {
    status = Status::bad_output;
    return pr.program->name + ": no samples for " + shape;
  }
  return "";
}

Row compare_pair(const ProgramResult& base, const ProgramResult& var, const std::string& shape, const std::string& kind,
                 std::uint64_t seed) {
  Row r;
  r.chapter = var.program->chapter;
  r.topic = var.program->topic;
  r.shape = shape;
  r.variant = var.program->name;
  r.against = base.program->name;
  r.kind = kind;
  Status st = Status::ok;
  std::string why = unusable(base, shape, st);
  if (why.empty()) why = unusable(var, shape, st);
  if (!why.empty()) {
    r.status = st;
    r.verdict = status_name(st);
    r.message = why;
    return r;
  }
  const Cell& b = *cell(base, shape);
  const Cell& v = *cell(var, shape);
  r.n_base = b.samples.size();
  r.n_var = v.samples.size();
  r.base_median = lab::stats::median(b.samples);
  r.var_median = lab::stats::median(v.samples);
  r.speedup = r.base_median / r.var_median;
  // Resampling whole rounds: samples of one process are not independent (see stats.hpp).
  const auto ci = lab::stats::bootstrap_median_ratio_ci_grouped(sample_groups(b), sample_groups(v), 0.95, 4000, seed);
  r.ci_lo = ci.lo;
  r.ci_hi = ci.hi;
  {
    // Round r of each side, for the rounds both have (a side's round can be missing: its run failed).
    std::map<int, std::vector<double>> rb, rv;
    if (b.rounds.size() == b.samples.size() && v.rounds.size() == v.samples.size()) {
      for (std::size_t i = 0; i < b.samples.size(); ++i) rb[b.rounds[i]].push_back(b.samples[i]);
      for (std::size_t i = 0; i < v.samples.size(); ++i) rv[v.rounds[i]].push_back(v.samples[i]);
    }
    std::vector<std::vector<double>> gb, gv;
    for (auto& [round, samples] : rb)
      if (auto it = rv.find(round); it != rv.end()) gb.push_back(std::move(samples)), gv.push_back(std::move(it->second));
    // Never narrower than the bootstrap's: rounds that agree exactly (a fake program, a coarse
    // timer) would give a zero-width interval that no other run could overlap.
    const auto rounds = lab::stats::round_ratio_t_interval(gb, gv);
    if (!std::isnan(rounds.lo)) {
      r.round_lo = std::min(rounds.lo, r.ci_lo);
      r.round_hi = std::max(rounds.hi, r.ci_hi);
    }
  }
  r.p = lab::stats::mann_whitney_u(b.samples, v.samples).p;
  r.verdict = verdict_for(r.speedup, r.ci_lo, r.ci_hi, r.p);
  if (auto it = v.counters.find("GB/s"); it != v.counters.end() && !it->second.empty())
    r.gbs = lab::stats::median(it->second);
  auto host_share = [](const Cell& c) {
    const auto it = c.counters.find(lab::kHostShareCounter);
    return it == c.counters.end() || it->second.empty() ? NAN : lab::stats::median(it->second);
  };
  r.base_host_share = host_share(b);
  r.var_host_share = host_share(v);
  if (!std::isnan(r.base_host_share) && !std::isnan(r.var_host_share))
    r.bound = r.base_host_share < lab::kHostBoundShare && r.var_host_share < lab::kHostBoundShare ? "GPU" : "host";
  return r;
}

Row failure_row(const ProgramResult& pr, const std::string& topic, const std::string& shape) {
  Row r;
  r.chapter = pr.program->chapter;
  r.topic = topic;
  r.shape = shape;
  r.variant = pr.program->name;
  r.status = pr.status;
  r.verdict = status_name(pr.status);
  r.message = pr.message;
  return r;
}

// The step opt[i] is compared with in its "vs previous step" row: the one before it in the list,
// or the one its file names (Program::after); none for the first, or where it names the baseline
// (the "vs baseline" row is that comparison) or a program not in this run.
const ProgramResult* previous_step(const std::vector<const ProgramResult*>& opt, std::size_t i,
                                   const ProgramResult* base) {
  const std::string& after = opt[i]->program->after;
  if (after.empty()) return i > 0 ? opt[i - 1] : nullptr;
  if (base && base->program->name == after) return nullptr;
  for (std::size_t k = 0; k < i; ++k)
    if (opt[k]->program->name == after) return opt[k];
  return nullptr;
}

}  // namespace

Analysis analyse(const Collected& c, std::uint64_t seed) {
  Analysis a;
  // Group by topic, keeping run order (baseline, steps, optimized, library).
  std::vector<std::string> topics;
  std::map<std::string, std::vector<const ProgramResult*>> by_topic;
  for (const auto& pr : c.programs) {
    const std::string t = pr.program->topic.empty() ? pr.program->name : pr.program->topic;
    if (!by_topic.count(t)) topics.push_back(t);
    by_topic[t].push_back(&pr);
    if (pr.status != Status::ok) a.any_failure = true;
    for (const auto& [shape, cl] : pr.shapes)
      if (cl.status != Status::ok && cl.status != Status::not_applicable) a.any_failure = true;
  }
  std::map<int, std::vector<double>> final_speedups;
  std::map<int, std::string> folders;
  for (const auto& t : topics) {
    const auto& progs = by_topic[t];
    const ProgramResult* base = nullptr;
    const ProgramResult* lib = nullptr;
    std::vector<const ProgramResult*> opt;
    for (const auto* pr : progs) {
      const std::string& role = pr->program->role;
      if (role == "baseline" && !base) base = pr;
      else if (role == "optimized") opt.push_back(pr);
      else if (role == "library" && !lib) lib = pr;
    }
    // The shapes, in the order the programs reported them.
    std::vector<std::string> shapes;
    for (const auto* pr : progs)
      for (const auto& s : pr->shape_order)
        if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
    if (shapes.empty()) shapes.push_back("(none)");
    for (const auto& shape : shapes) {
      // The final speedup at a shape: the last optimized variant's, or where it does not apply
      // (N/A), the last one's that does; none when a variant that applies failed.
      double final_speedup = NAN;
      bool final_valid = true;
      int final_chapter = 0;
      for (std::size_t i = 0; i < opt.size(); ++i) {
        if (base) {
          Row r = compare_pair(*base, *opt[i], shape, "vs baseline", seed);
          final_chapter = r.chapter;
          if (r.status == Status::ok) final_speedup = r.speedup, final_valid = true;
          else if (r.status != Status::not_applicable) final_valid = false;
          if (i + 1 == opt.size() && final_valid && !std::isnan(final_speedup))
            final_speedups[final_chapter].push_back(final_speedup);
          folders[r.chapter] = opt[i]->program->folder;
          a.rows.push_back(std::move(r));
        }
        if (const ProgramResult* prev = previous_step(opt, i, base)) {
          a.rows.push_back(compare_pair(*prev, *opt[i], shape, "vs previous step", seed));
        }
        if (lib && i + 1 == opt.size()) a.rows.push_back(compare_pair(*lib, *opt[i], shape, "vs library", seed));
      }
      if (lib && base) a.rows.push_back(compare_pair(*base, *lib, shape, "vs baseline", seed));
      // A lone baseline that failed is still a row.
      if (opt.empty() && !lib && base && base->status != Status::ok) a.rows.push_back(failure_row(*base, t, shape));
    }
    // Programs with no pair at all (no baseline): failures must still show.
    if (!base)
      for (const auto* pr : progs)
        if (pr->status != Status::ok) a.rows.push_back(failure_row(*pr, t, ""));
  }
  for (const auto& r : a.rows)
    if (r.status != Status::ok && r.status != Status::not_applicable) a.any_failure = true;
  for (const auto& [ch, v] : final_speedups) {
    ChapterSummary s;
    s.chapter = ch;
    s.folder = folders[ch];
    s.matched = static_cast<int>(v.size());
    s.geomean = v.empty() ? NAN : lab::stats::geomean(v);
    a.chapters.push_back(s);
  }
  return a;
}

}  // namespace compare
