// This run against a saved one (--against): regressions, program by program, and the agreement
// rule, row by row.
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
#include "report.hpp"
#include "lab/contract.hpp"
#include "lab/harness.hpp"
#include "lab/stats.hpp"

namespace compare {

std::vector<Change> against(const std::string& text, const Collected& now, bool ignore_device, std::string& error) {
  std::vector<Change> out;
  nlohmann::json prev;
  try {
    prev = parse_run_file(text);
  } catch (const std::exception& e) {
    error = std::string("the previous run: ") + e.what();
    return out;
  }
  const std::string prev_uuid = prev.value("device", nlohmann::json::object()).value("uuid", "");
  const auto it = now.context.find("lab_device_uuid");
  const std::string now_uuid = it == now.context.end() ? "" : it->second;
  if (!ignore_device && prev_uuid != now_uuid) {
    error = "the previous run was on another device (" + prev.value("device", nlohmann::json::object()).value("name", "?") +
            ", " + prev_uuid + "); pass --ignore-device to compare anyway";
    return out;
  }
  for (const auto& pp : prev.value("programs", nlohmann::json::array())) {
    const std::string name = pp.value("program", "");
    const ProgramResult* cur = nullptr;
    for (const auto& pr : now.programs)
      if (pr.program->name == name) cur = &pr;
    if (!cur) continue;
    for (const auto& ps : pp.value("shapes", nlohmann::json::array())) {
      const std::string shape = ps.value("shape", "");
      const auto cit = cur->shapes.find(shape);
      Cell before;
      before.samples = ps.value("samples_s", std::vector<double>{});
      before.rounds = ps.value("rounds", std::vector<int>{});
      const auto& samples = before.samples;
      if (cit == cur->shapes.end() || cit->second.samples.empty() || samples.empty()) continue;
      Change ch;
      ch.program = name;
      ch.shape = shape;
      ch.before = lab::stats::median(samples);
      ch.after = lab::stats::median(cit->second.samples);
      ch.ratio = ch.before / ch.after;
      // Between two runs the unit of independence is the process: with 4 or more rounds a side the
      // test compares the rounds' medians (a busy host slows a whole process, not one sample).
      const auto gb = sample_groups(before), ga = sample_groups(cit->second);
      if (gb.size() >= 4 && ga.size() >= 4) {
        std::vector<double> mb, ma;
        for (const auto& g : gb) mb.push_back(lab::stats::median(g));
        for (const auto& g : ga) ma.push_back(lab::stats::median(g));
        ch.p = lab::stats::mann_whitney_u(mb, ma).p;
      } else {
        ch.p = lab::stats::mann_whitney_u(samples, cit->second.samples).p;
      }
      const auto ci = lab::stats::bootstrap_median_ratio_ci_grouped(gb, ga, 0.95, 4000, 1);
      const std::string v = verdict_for(ch.ratio, ci.lo, ci.hi, ch.p);
      ch.verdict = v == "FASTER" ? (ch.ratio >= 1.05 ? "IMPROVED" : "SAME")
                   : v == "SLOWER" ? (ch.ratio <= 1 / 1.05 ? "REGRESSED" : "SAME")
                                   : v;
      out.push_back(ch);
    }
  }
  return out;
}

void validate_previous_run(const std::string& text) { (void)parse_run_file(text); }

Agreement row_agreement(const std::string& text, const Analysis& now) {
  Agreement a;
  nlohmann::json prev;
  try {
    prev = parse_run_file(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the previous run: ") + e.what());
  }
  std::map<std::string, const nlohmann::json*> before;
  auto key = [](const std::string& v, const std::string& k, const std::string& ag, const std::string& s) {
    return v + "|" + k + "|" + ag + "|" + s;
  };
  for (const auto& r : prev["rows"])  // pointers into prev: no copy of the array
    before[key(r.value("variant", ""), r.value("kind", ""), r.value("against", ""), r.value("shape", ""))] = &r;
  for (const auto& r : now.rows) {
    const auto it = before.find(key(r.variant, r.kind, r.against, r.shape));
    if (it == before.end()) continue;
    const nlohmann::json& o = *it->second;
    RowChange c;
    c.variant = r.variant;
    c.kind = r.kind;
    c.against = r.against;
    c.shape = r.shape;
    c.verdict_before = o.value("verdict", "");
    c.verdict_after = r.verdict;
    if (o.contains("speedup") && o["speedup"].is_number()) c.before = o["speedup"].get<double>();
    c.after = r.speedup;
    if (!(c.before > 0 && c.after > 0)) continue;  // a failure row: its status already says so
    c.diff_pct = 100.0 * (c.after / c.before - 1.0);
    c.within_ci = c.before >= r.ci_lo && c.before <= r.ci_hi;
    auto pair_at = [&](const char* k, double& lo, double& hi) {
      if (!o.contains(k) || !o[k].is_array() || o[k].size() != 2 || !o[k][0].is_number() || !o[k][1].is_number())
        return false;
      lo = o[k][0].get<double>(), hi = o[k][1].get<double>();
      return true;
    };
    // Round-level intervals on both sides where both have one; a previous run saved without one (or
    // a run of one round) falls back to the bootstrap intervals.
    const bool rounds_now = !std::isnan(r.round_lo) && !std::isnan(r.round_hi);
    if (rounds_now && pair_at("round_ci95", c.before_lo, c.before_hi)) {
      c.after_lo = r.round_lo, c.after_hi = r.round_hi;
      c.intervals_overlap = c.before_lo <= c.after_hi && c.after_lo <= c.before_hi;
    } else if (pair_at("ci95", c.before_lo, c.before_hi)) {
      c.after_lo = r.ci_lo, c.after_hi = r.ci_hi;
      c.intervals_overlap = c.before_lo <= c.after_hi && c.after_lo <= c.before_hi;
    } else {
      c.after_lo = r.ci_lo, c.after_hi = r.ci_hi;
      c.intervals_overlap = c.within_ci;  // no interval saved: this run's alone
    }
    c.bound = r.bound;
    if (r.bound == "GPU") {
      c.rule = "within 5%";
      c.agrees = std::fabs(c.diff_pct) <= kGpuBoundAgreementPct;
    } else {
      c.rule = "intervals overlap";
      c.agrees = c.intervals_overlap;
    }
    a.rows.push_back(c);
  }
  for (const auto& c : a.rows) {
    if (c.verdict_before != c.verdict_after) ++a.verdicts_differ;
    if (std::fabs(c.diff_pct) > 5.0) ++a.over_5pct;
    if (c.bound == "GPU") {
      ++a.gpu_rows;
      if (!c.agrees) ++a.gpu_failed;
    } else {
      ++a.host_rows;
      if (!c.agrees) ++a.host_failed;
    }
    if (!std::isnan(c.diff_pct) && (!a.largest || std::fabs(c.diff_pct) > std::fabs(a.largest->diff_pct)))
      a.largest = &c;
  }
  return a;
}

}  // namespace compare
