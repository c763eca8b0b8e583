#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "lab/contract.hpp"
#include "lab/stats.hpp"
#include "process.hpp"

namespace compare {

namespace {


std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

std::string pvalue(double p) {
  if (std::isnan(p)) return "-";
  char buf[32];
  if (p < 1e-4)
    std::snprintf(buf, sizeof buf, "%.0e", p);
  else
    std::snprintf(buf, sizeof buf, "%.4f", p);
  return buf;
}

std::string speedup_text(const Row& r) {
  if (std::isnan(r.speedup)) return "-";
  if (r.kind == "vs library") return fixed(100.0 * r.speedup, 1) + "% of lib";
  return fixed(r.speedup, 2) + "x";
}

std::string ci_text(const Row& r) {
  if (std::isnan(r.ci_lo)) return "-";
  const bool lib = r.kind == "vs library";
  std::string s = "[";  // appended, not "[" + std::string: GCC 12 warns (-Wrestrict) on that form
  s += lib ? fixed(100 * r.ci_lo, 1) : fixed(r.ci_lo, 2);
  s += ", ";
  s += lib ? fixed(100 * r.ci_hi, 1) : fixed(r.ci_hi, 2);
  s += lib ? "]%" : "]";
  return s;
}

std::string gbs_text(double v) { return std::isnan(v) ? "-" : fixed(v, 0); }

std::vector<std::vector<std::string>> table_cells(const Analysis& a) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : a.rows) {
    rows.push_back({r.topic, r.shape, r.variant, r.kind + " " + r.against, format_time(r.base_median),
                    format_time(r.var_median), speedup_text(r), ci_text(r), pvalue(r.p), r.verdict, gbs_text(r.gbs),
                    r.bound.empty() ? "" : r.bound});
  }
  return rows;
}

const std::vector<std::string> kHeader = {"topic", "shape", "variant", "compared with", "their median", "median",
                                          "speedup", "95% CI", "p (U test)", "verdict", "GB/s", "bound"};

std::string color_for(const std::string& verdict) {
  if (verdict == "FASTER" || verdict == "IMPROVED") return "\033[32m";
  if (verdict == "SAME") return "\033[36m";
  if (verdict == "NOISY") return "\033[33m";
  return "\033[31m";  // SLOWER, REGRESSED and every failure
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string num(double v) {
  if (std::isnan(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// One line per distinct failure: a program that failed as a whole is named once, not per shape.
std::vector<std::string> failure_lines(const Analysis& a) {
  std::vector<std::string> lines;
  std::vector<std::string> seen;
  for (const auto& r : a.rows) {
    if (r.status == Status::ok || r.status == Status::not_applicable) continue;
    const std::string key = r.verdict + "|" + r.message;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    lines.push_back(r.verdict + " " + r.message);
  }
  return lines;
}

// One line per variant and reason for the N/A rows: which variant does not run which shapes, and why.
std::vector<std::string> not_applicable_lines(const Analysis& a) {
  std::vector<std::pair<std::string, std::vector<std::string>>> by;  // "variant: reason" -> shapes
  for (const auto& r : a.rows) {
    if (r.status != Status::not_applicable) continue;
    const std::string key = r.message;
    auto it = std::find_if(by.begin(), by.end(), [&](const auto& e) { return e.first == key; });
    if (it == by.end()) it = by.insert(by.end(), {key, {}});
    if (std::find(it->second.begin(), it->second.end(), r.shape) == it->second.end()) it->second.push_back(r.shape);
  }
  std::vector<std::string> lines;
  for (const auto& [key, shapes] : by) {
    std::string s;
    for (const auto& sh : shapes) s += (s.empty() ? "" : ", ") + sh;
    lines.push_back(key + " (" + s + ")");
  }
  return lines;
}


}  // namespace

std::string format_time(double s) {
  if (std::isnan(s)) return "-";
  char buf[32];
  if (s < 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  else if (s < 1)
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}


void print_table(std::ostream& out, const Analysis& a, const Meta& m, bool color) {
  out << m.line() << "\n\n";
  auto cells = table_cells(a);
  std::vector<std::size_t> w(kHeader.size());
  for (std::size_t i = 0; i < kHeader.size(); ++i) w[i] = kHeader[i].size();
  for (const auto& r : cells)
    for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  auto line = [&](const std::vector<std::string>& r, bool colored) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      const bool numeric = i >= 4 && i != 9;
      std::string cellv = r[i];
      std::string pad(w[i] - cellv.size(), ' ');
      std::string text = numeric ? pad + cellv : cellv + pad;
      if (colored && i == 9) text = color_for(cellv) + text + "\033[0m";
      out << text << (i + 1 < r.size() ? "  " : "\n");
    }
  };
  line(kHeader, false);
  for (const auto& r : cells) line(r, color);
  const auto failures = failure_lines(a);
  if (!failures.empty()) out << "\nfailures:\n";
  for (const auto& f : failures) out << "  " << f << "\n";
  const auto na = not_applicable_lines(a);
  if (!na.empty()) out << "\nnot applicable (the variant declares it does not run these shapes):\n";
  for (const auto& f : na) out << "  " << f << "\n";
  out << "\n";
  for (const auto& s : a.chapters)
    out << s.folder << ": geometric mean speedup of the final optimized variants over their baselines: "
        << fixed(s.geomean, 2) << "x over " << s.matched << " matched shapes\n";
}

std::string markdown(const Analysis& a, const Meta& m, const Collected* c) {
  std::ostringstream o;
  o << "Measured by `compare` on " << m.line() << ".\n\n";
  o << "| topic | shape | variant | compared with | their median | median | speedup | 95% CI | p | verdict | GB/s |\n";
  o << "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n";
  for (const auto& r : a.rows) {
    o << "| " << r.topic << " | " << r.shape << " | `" << r.variant << "` | " << r.kind << " `" << r.against << "` | "
      << format_time(r.base_median) << " | " << format_time(r.var_median) << " | " << speedup_text(r) << " | "
      << ci_text(r) << " | " << pvalue(r.p) << " | " << r.verdict << " | " << gbs_text(r.gbs) << " |\n";
  }
  const auto failures = failure_lines(a);
  if (!failures.empty()) o << "\nFailures:\n\n";
  for (const auto& f : failures) o << "- " << f << "\n";
  const auto na = not_applicable_lines(a);
  if (!na.empty()) o << "\nNot applicable (the variant declares it does not run these shapes):\n\n";
  for (const auto& f : na) o << "- " << f << "\n";
  o << "\n";
  for (const auto& s : a.chapters)
    o << "Geometric mean speedup of the final optimized variants over their baselines (" << s.folder << ", "
      << s.matched << " matched shapes): **" << fixed(s.geomean, 2) << "x**\n";
  if (c) {
    o << "\nEvery program's median time and counters (medians over the samples):\n\n"
      << "| program | shape | median | counters |\n| --- | --- | ---: | --- |\n";
    for (const auto& pr : c->programs)
      for (const auto& shape : pr.shape_order) {
        const Cell& cl = pr.shapes.at(shape);
        if (cl.samples.empty()) continue;
        std::string counters;
        for (const auto& [name, values] : cl.counters) {
          if (values.empty()) continue;
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.4g", lab::stats::median(values));
          if (!counters.empty()) counters += ", ";
          counters.append(name).append(" ").append(buf);
        }
        o << "| `" << pr.program->name << "` | " << shape << " | " << format_time(lab::stats::median(cl.samples))
          << " | " << counters << " |\n";
      }
  }
  return o.str();
}

std::string csv(const Analysis& a, const Meta& m) {
  std::ostringstream o;
  o << "chapter,topic,shape,variant,against,kind,status,against_median_s,variant_median_s,speedup,ci_lo,ci_hi,"
       "p_value,verdict,variant_gbs,n_against,n_variant,message,device,driver,cuda,sm_clock_mhz,mem_clock_mhz,"
       "cache,date,commit\n";
  for (const auto& r : a.rows) {
    o << r.chapter << "," << csv_field(r.topic) << "," << r.shape << "," << r.variant << "," << r.against << ","
      << csv_field(r.kind) << "," << status_name(r.status) << "," << num(r.base_median) << "," << num(r.var_median) << ","
      << num(r.speedup) << "," << num(r.ci_lo) << "," << num(r.ci_hi) << "," << num(r.p) << "," << r.verdict << ","
      << num(r.gbs) << "," << r.n_base << "," << r.n_var << "," << csv_field(r.message) << "," << csv_field(m.device)
      << "," << m.driver << "," << m.runtime << "," << m.sm_clock_mhz << "," << m.mem_clock_mhz << "," << m.cache << ","
      << m.date << "," << m.commit << "\n";
  }
  return o.str();
}


void print_changes(std::ostream& out, const std::vector<Change>& changes, bool color) {
  out << "\nagainst the previous run (before / after: above 1 is faster now):\n";
  for (const auto& ch : changes) {
    std::string v = ch.verdict;
    if (color) v = color_for(v) + v + "\033[0m";
    out << "  " << std::left << std::setw(32) << ch.program << std::setw(14) << ch.shape << std::right << std::setw(10)
        << format_time(ch.before) << " -> " << std::setw(10) << format_time(ch.after) << "  " << fixed(ch.ratio, 3)
        << "x  p " << pvalue(ch.p) << "  " << v << "\n";
  }
  if (changes.empty()) out << "  (no program and shape in common)\n";
}

void print_agreement(std::ostream& out, const Agreement& a) {
  const int n = static_cast<int>(a.rows.size());
  out << "\nagreement with the previous run (GPU-bound rows: speedups within 5%; host-bound rows: the two "
         "runs' round-level 95% t-intervals overlap, one speedup per round):\n";
  if (n == 0) {
    out << "  (no row in common)\n";
    return;
  }
  out << "  " << n << " rows in both runs; GPU-bound " << a.gpu_rows << " (" << a.gpu_rows - a.gpu_failed
      << " agree), host-bound " << a.host_rows << " (" << a.host_rows - a.host_failed << " agree); same verdict: "
      << n - a.verdicts_differ << "; speedups within 5%: " << n - a.over_5pct;
  if (a.largest)
    out << "; largest difference " << (a.largest->diff_pct >= 0 ? "+" : "") << fixed(a.largest->diff_pct, 1) << "% ("
        << a.largest->variant << " " << a.largest->shape << " " << a.largest->kind << ")";
  out << "\n";
  for (const auto& c : a.rows) {
    if (c.agrees && c.verdict_before == c.verdict_after) continue;
    out << "  " << (c.agrees ? "agrees   " : "DISAGREES") << " " << std::left << std::setw(34) << c.variant
        << std::setw(18) << c.shape << std::setw(18) << c.kind << std::right << std::setw(9) << fixed(c.before, 2)
        << "x -> " << std::setw(9) << fixed(c.after, 2) << "x (" << (c.diff_pct >= 0 ? "+" : "") << fixed(c.diff_pct, 1)
        << "%)  " << (c.bound.empty() ? "bound unknown" : c.bound + "-bound") << ", rule: " << c.rule << " (["
        << fixed(c.before_lo, 2) << ", " << fixed(c.before_hi, 2) << "] and [" << fixed(c.after_lo, 2) << ", "
        << fixed(c.after_hi, 2) << "]); "
        << c.verdict_before << " -> " << c.verdict_after << "\n";
  }
  out << "  the runs " << (a.agrees() ? "agree" : "DISAGREE") << "\n";
}

std::string programs_markdown(const std::vector<const Program*>& programs, const std::string& command) {
  std::ostringstream o;
  o << "Listed by `" << command << "` from each program's `--describe`, in the order\n"
       "compare runs them (intermediate steps between the baseline and the final optimized variant).\n\n"
       "| topic | program | role | what it does |\n| --- | --- | --- | --- |\n";
  std::string last_topic;
  for (const Program* p : programs) {
    if (!p->built) throw std::runtime_error(p->name + ": " + p->describe_error);
    const bool demo = p->kind == "demo" || p->role == "demo";
    std::string role = p->role;
    auto step_name = [](const Program& q) {
      return q.step == lab::kFinalStep ? std::string("optimized (final)") : "step " + std::to_string(q.step);
    };
    if (p->role == "optimized") role = step_name(*p);
    if (p->role == "optimized" && !p->after.empty()) {  // a ladder that branches: the step it changes
      std::string what = "`" + p->after + "`";
      for (const Program* q : programs)
        if (q->name == p->after) what = q->role == "baseline" ? "the baseline" : q->role == "optimized" ? step_name(*q) : what;
      role += ", after " + what;
    }
    const std::string topic = demo ? "(demo)" : p->topic;
    const std::string cell = topic == last_topic && !demo ? "" : " " + topic;  // a topic's name once
    o << "|" << cell << " | `" << p->name << "` | " << role << " | " << p->description << " |\n";
    last_topic = topic;
  }
  return o.str();
}

}  // namespace compare

