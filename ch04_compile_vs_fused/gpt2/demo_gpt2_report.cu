// Demo: the GPT-2 report, the C++ counterpart of the users' compiled-transformer benchmark. For
// every model size x context length (batch 4, vocabulary 10000 by default) and every
// implementation of the gpt2_step topic (vanilla = the baseline; compiled, fused, ... = the
// optimized variants, named by what follows "gpt2_step_" in their program names), it times the
// three phases (the forward; forward + backward; the full step with AdamW) and writes the
// benchmark's CSV columns first:
//   model_size, context_length, num_params, num_params_millions, forward_vanilla_ms,
//   forward_compiled_ms, forward_speedup, fwd_bwd_vanilla_ms, fwd_bwd_compiled_ms, fwd_bwd_speedup,
//   full_step_vanilla_ms, full_step_compiled_ms, full_step_speedup
// (the compiled cells empty while no compiled variant is built), then for every other
// implementation X and phase P: P_X_ms and P_X_speedup, and for every implementation:
//   P_X_peak_mib  peak device memory held by the lab's buffers in that run (parameters,
//                 gradients, moments, activations, scratch; MiB = 2^20 bytes)
//   P_X_mfu_pct   model FLOPs utilisation: 2 N tokens + the attention's FLOPs (forward), 6 N tokens
//                 + three times the attention's (the training phases), N the parameter count,
//                 over the median time, against the rate of the GEMM the implementation's
//                 precision runs, measured at the start (8192^3 cuBLAS): SGEMM (fp32 on the CUDA
//                 cores, no TF32) for fp32 and 3xTF32, bf16 operands with fp32 accumulation on the
//                 tensor cores for a precision starting "bf16" (the bf16 rows)
//   P_X_status    ok, OOM (the configuration did not fit), N/A (the implementation does not run
//                 it) or empty (not run): the timing columns are empty for the last three
// Times are medians of --reps runs (CUDA events, the L2 flushed before each). A configuration
// that does not fit is OOM in its cells, never a crash, and the grid goes on; one an
// implementation does not run (a head size it does not take) is N/A. Before timing, every
// implementation passes the topic's check shapes against the double reference (--no-check
// skips that), so a wrong step cannot report a time.
//
// --profile adds, after the timing, where one full step's GPU time goes for each configuration and
// implementation: its kernels (and copies and memsets) recorded by CUPTI over 3 steps after 2
// warm-up steps (L2 not flushed), summed by kind of work (gpt2/work_kinds.hpp): the matrix products
// (cuBLAS's kernels, and the lab's own product with GELU in its epilogue, steps 21 and 22), the
// attention's kernels (the flash kernels; the vanilla step's T x T products are cuBLAS's and
// its softmax, scale and mask kernels count here), AdamW, and the rest (LayerNorm, GELU, the
// loss, the layouts, the roundings, the embeddings, memsets). ms a step and the share of the GPU
// time; the GPU time of kernels on the two streams may overlap, so the sum can exceed the step.
// A second table lists the rest by kernel (its 12 largest, ms and launches a step): where a step's
// time outside the products, the attention and AdamW goes.
//
// --dump DIR runs one configuration's full step once with each implementation and writes the
// inputs and every implementation's loss, gradients and updated parameters and moments, for
// tools/torch_gpt2.py --check DIR (the same weights and data in PyTorch).
//
// --csv FILE is written again after every configuration, so a run cut short keeps the rows it
// finished; --resume then keeps FILE's rows (their configurations are not measured again) and adds
// the rest, so the grid can be run in pieces (a device call of ten minutes, a session). The file
// names its implementations (its header: without --variants, --resume runs those; with it, they are
// checked against the file's) and each row's parameter count (checked against this run's --vocab),
// not the run's other settings (--batch, --reps): resume with those of the run that wrote it. Where
// FILE holds every configuration asked for, nothing is
// measured and no GPU is needed: the tables are printed (and --markdown written) from FILE.
// Run: make ch04 && ./ch04_compile_vs_fused/demo_gpt2_report --csv gpt2.csv --markdown gpt2.md
// ctest-args: --sizes tiny --contexts 16,77 --reps 2 --no-check
// ctest-timeout: 300
// (--no-check: the check of every implementation against the double reference is each program's
// own check_only test, the same shapes and checks; run here too it took over 600 s beside the
// other tests of ctest -j on an H200. The check path itself runs in ch04.demo_gpt2_report.check,
// one implementation.)
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/gpt2.cuh"
#include "gpt2/report_passes.hpp"
#include "lab/demo.hpp"
#include "lab/device.hpp"
#include "lab/harness.hpp"

namespace {

using lab::fixed;
using lab::join;
using gpt2::Phase;
using gpt2::report::Breakdown;

constexpr const char* kDescription =
    "the GPT-2 report: every implementation's forward, forward + backward and full step over model sizes x "
    "contexts, the benchmark's CSV and speedup tables";
constexpr Phase kPhases[] = {Phase::forward, Phase::forward_backward, Phase::step};

// The benchmark's sizes, and "tiny" (the check configuration's width, for smoke runs).
struct Size {
  std::string name;
  int d, layers, heads;
};
std::vector<Size> known_sizes() {
  std::vector<Size> out;
  for (const auto& s : gpt2::kSizes) out.push_back({s.name, s.d, s.layers, s.heads});
  out.push_back({"tiny", 64, 2, 4});
  return out;
}

struct Settings {
  std::vector<std::string> sizes{"small", "medium", "large", "xl", "2.7B"};
  std::vector<std::int64_t> contexts{gpt2::kContexts[0], gpt2::kContexts[1], gpt2::kContexts[2], gpt2::kContexts[3]};
  std::vector<std::string> configs;   // "size:context" pairs instead of sizes x contexts
  std::vector<std::string> variants;  // empty: all
  int batch = gpt2::kBatch, vocab = gpt2::kVocab, reps = 5, warmup = 3;
  bool no_check = false, profile = false, resume = false;
  std::uint64_t seed = 1;
  std::string csv, markdown, dump;
};

struct Implementation {
  std::string name;  // vanilla, compiled, fused, ...
  const lab::Variant* variant = nullptr;
};

// The GEMM rates MFU is measured against (TFLOP/s): fp32's, and bf16's for the bf16 rows.
struct Rates {
  double fp32 = 0, bf16 = 0;
  double of(const lab::Variant& v) const { return v.declared.precision.starts_with("bf16") ? bf16 : fp32; }
};

std::string label(const lab::Variant& v) {
  if (v.role == lab::Role::baseline) return "vanilla";
  const std::string lead = std::string(Gpt2Step::name) + "_";
  const auto at = v.program.find(lead);
  return at == std::string::npos ? lab::role_name(v.role) : v.program.substr(at + lead.size());
}

// The implementations named (all where none is), in that order; `source` says where the names
// came from, for the message about one this build does not have.
std::vector<Implementation> implementations(const std::vector<std::string>& wanted,
                                            const std::string& source = "--variants") {
  std::vector<Implementation> all;
  for (const lab::Variant* v : lab::Registry::global().of_topic(Gpt2Step::name)) all.push_back({label(*v), v});
  if (wanted.empty()) return all;
  std::vector<Implementation> out;
  for (const auto& w : wanted) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Implementation& i) { return i.name == w; });
    if (it == all.end()) {
      std::vector<std::string> names;
      for (const auto& i : all) names.push_back(i.name);
      throw lab::UsageError(source + " " + w + ": no such implementation (built: " + join(names) + ")");
    }
    out.push_back(*it);
  }
  return out;
}

lab::Shape shape_of(const Size& s, int context, const Settings& cfg, Phase phase) {
  return {s.layers, s.d, s.heads, context, cfg.batch, cfg.vocab, static_cast<int>(phase)};
}

// The FLOPs model FLOPs utilisation counts: 2 N per token forward, 6 N per token with the
// backward, plus the causal attention's products (forward once, backward twice more).
double mfu_flops(const gpt2::Config& c, Phase phase) {
  const double n = double(gpt2::param_count(c)), tokens = double(c.tokens()), T = c.context;
  const double attention = 4.0 * c.batch * c.layers * T * T * c.d * (T + 1) / (2 * T);
  return phase == Phase::forward ? 2 * n * tokens + attention : 6 * n * tokens + 3 * attention;
}

struct Cell {
  lab::Measurement m;
  std::string text() const {
    if (!m.not_applicable.empty()) return "N/A";
    if (m.oom) return "OOM";
    return m.ms ? fixed(*m.ms, 3) : "-";
  }
};

struct Row {
  Size size;
  int context = 0;
  std::size_t params = 0;
  std::map<std::pair<Phase, std::string>, Cell> cells;  // (phase, implementation)
  std::map<std::string, Breakdown> profile;             // implementation -> its full step's (--profile)
  // --resume: a row kept from the CSV, its line as that run wrote it and the MFU it printed
  std::string kept_line;
  std::map<std::pair<Phase, std::string>, double> kept_mfu;
  const Cell* at(Phase p, const std::string& impl) const {
    const auto it = cells.find({p, impl});
    return it == cells.end() ? nullptr : &it->second;
  }
  std::optional<double> ms(Phase p, const std::string& impl) const {
    const Cell* c = at(p, impl);
    return c ? c->m.ms : std::nullopt;
  }
};

gpt2::Config config_of(const Row& r, const Settings& cfg) {
  return {r.size.layers, r.size.d, r.size.heads, r.context, cfg.batch, cfg.vocab};
}

std::string opt(const std::optional<double>& x, int decimals) { return x ? fixed(*x, decimals) : std::string(); }

std::optional<double> ratio(const std::optional<double>& a, const std::optional<double>& b) {
  if (a && b && *b > 0) return *a / *b;
  return std::nullopt;
}

std::optional<double> mfu_pct(const Row& r, Phase p, const Implementation& impl, const Settings& cfg,
                              const Rates& rates) {
  if (const auto kept = r.kept_mfu.find({p, impl.name}); kept != r.kept_mfu.end()) return kept->second;
  const auto ms = r.ms(p, impl.name);
  const double rate = rates.of(*impl.variant);
  if (!ms || rate <= 0) return std::nullopt;
  return 100 * mfu_flops(config_of(r, cfg), p) / (*ms * 1e-3) / (rate * 1e12);
}

std::string csv_header(const std::vector<std::string>& names) {
  std::ostringstream h;
  h << "model_size,context_length,num_params,num_params_millions";
  for (Phase p : kPhases) {
    const std::string n = gpt2::phase_name(p);
    h << "," << n << "_vanilla_ms," << n << "_compiled_ms," << n << "_speedup";
  }
  for (Phase p : kPhases)
    for (const auto& x : names) {
      const std::string col = std::string(gpt2::phase_name(p)) + "_" + x;
      if (x != "vanilla" && x != "compiled") h << "," << col << "_ms," << col << "_speedup";
    }
  for (Phase p : kPhases)
    for (const auto& x : names) {
      const std::string col = std::string(gpt2::phase_name(p)) + "_" + x;
      h << "," << col << "_peak_mib," << col << "_mfu_pct";
    }
  for (Phase p : kPhases)
    for (const auto& x : names) h << "," << gpt2::phase_name(p) << "_" << x << "_status";
  return h.str();
}

std::vector<std::string> names_of(const std::vector<Implementation>& impls) {
  std::vector<std::string> names;
  for (const auto& i : impls) names.push_back(i.name);
  return names;
}

std::string status(const Cell* c) {
  if (!c) return "";
  if (!c->m.not_applicable.empty()) return "N/A";
  return c->m.oom ? "OOM" : c->m.ms ? "ok" : "";
}

std::string csv_line(const Row& r, const std::vector<Implementation>& impls, const Settings& cfg, const Rates& rates) {
  if (!r.kept_line.empty()) return r.kept_line;
  const std::vector<std::string> names = names_of(impls);
  std::ostringstream o;
  o << r.size.name << "," << r.context << "," << r.params << "," << fixed(double(r.params) / 1e6, 2);
  for (Phase p : kPhases) {
    const auto v = r.ms(p, "vanilla"), c = r.ms(p, "compiled");
    o << "," << opt(v, 4) << "," << opt(c, 4) << "," << opt(ratio(v, c), 3);
  }
  for (Phase p : kPhases)
    for (const auto& x : names)
      if (x != "vanilla" && x != "compiled")
        o << "," << opt(r.ms(p, x), 4) << "," << opt(ratio(r.ms(p, "vanilla"), r.ms(p, x)), 3);
  for (Phase p : kPhases)
    for (const auto& x : impls) {
      const Cell* c = r.at(p, x.name);
      o << "," << (c ? opt(c->m.peak_mib, 1) : "") << "," << opt(mfu_pct(r, p, x, cfg, rates), 2);
    }
  for (Phase p : kPhases)
    for (const auto& x : impls) o << "," << status(r.at(p, x.name));
  return o.str();
}

// One table a phase: a row per configuration; each implementation's ms, its speedup over vanilla,
// its MFU and its peak memory.
std::string tables(const std::vector<Row>& rows, const std::vector<Implementation>& impls, const Settings& cfg,
                   const Rates& rates, bool markdown) {
  const std::vector<std::string> names = names_of(impls);
  std::ostringstream o;
  auto line = [&](const std::vector<std::string>& cells) { lab::table_row(o, cells, markdown); };
  const char* title[] = {"forward (the loss)", "forward + backward (every gradient)", "full step (and AdamW)"};
  for (int t = 0; t < 3; ++t) {
    const Phase p = kPhases[t];
    o << "\n" << (markdown ? "**" : "") << title[t] << ": ms, speedup over vanilla, MFU, peak MiB"
      << (markdown ? "**" : "") << "\n\n";
    std::vector<std::string> head{"model", "params (M)", "context"};
    for (const auto& n : names) head.push_back(n + " ms");
    for (const auto& n : names)
      if (n != "vanilla") head.push_back(n + " speedup");
    head.push_back("MFU (" + join(names, " / ") + ")");
    head.push_back("peak MiB (" + join(names, " / ") + ")");
    line(head);
    if (markdown) line(std::vector<std::string>(head.size(), "---:"));
    for (const auto& r : rows) {
      std::vector<std::string> cells{r.size.name, fixed(double(r.params) / 1e6, 1), std::to_string(r.context)};
      for (const auto& n : names) cells.push_back(r.at(p, n) ? r.at(p, n)->text() : "-");
      for (const auto& n : names)
        if (n != "vanilla") {
          const auto s = ratio(r.ms(p, "vanilla"), r.ms(p, n));
          cells.push_back(s ? fixed(*s, 2) + "x" : "-");
        }
      std::string mfu, mem;
      for (const auto& n : impls) {
        const auto f = mfu_pct(r, p, n, cfg, rates);
        mfu += (mfu.empty() ? "" : " / ") + (f ? fixed(*f, 1) + "%" : std::string("-"));
        const Cell* c = r.at(p, n.name);
        mem += (mem.empty() ? "" : " / ") + (c && c->m.peak_mib ? fixed(*c->m.peak_mib, 0) : std::string("-"));
      }
      cells.push_back(mfu);
      cells.push_back(mem);
      line(cells);
    }
  }
  return o.str();
}

// --profile's table: a row per configuration and implementation, ms a step (share of the GPU time).
std::string breakdown_table(const std::vector<Row>& rows, const std::vector<Implementation>& impls, bool markdown) {
  std::ostringstream o;
  o << "\n" << (markdown ? "**" : "")
    << "where one full step's GPU time goes (--profile, CUPTI): ms a step (share of the GPU time)"
    << (markdown ? "**" : "") << "\n\n";
  std::vector<std::string> head{"model", "context", "implementation", "step ms"};
  for (const char* k : Breakdown::kKinds) head.push_back(k);
  auto line = [&](const std::vector<std::string>& cells) { lab::table_row(o, cells, markdown); };
  line(head);
  if (markdown) line(std::vector<std::string>(head.size(), "---:"));
  for (const auto& r : rows)
    for (const auto& impl : impls) {
      const auto it = r.profile.find(impl.name);
      if (it == r.profile.end()) continue;
      const Breakdown& b = it->second;
      std::vector<std::string> cells{r.size.name, std::to_string(r.context), impl.name};
      if (!b.not_run.empty()) {
        cells.resize(head.size(), b.not_run);
      } else {
        double gpu = 0;
        for (double ms : b.ms) gpu += ms;
        cells.push_back(fixed(b.step_ms, 2));
        for (double ms : b.ms) cells.push_back(fixed(ms, 2) + " (" + fixed(gpu > 0 ? 100 * ms / gpu : 0, 0) + "%)");
      }
      line(cells);
    }
  return o.str();
}

// --profile's second table: "the rest" of each full step by kernel, the `top` largest, ms a step
// and launches a step.
std::string rest_table(const std::vector<Row>& rows, const std::vector<Implementation>& impls, bool markdown,
                       std::size_t top = 12) {
  std::ostringstream o;
  o << "\n" << (markdown ? "**" : "") << "\"the rest\" by kernel (--profile): the " << top
    << " largest, ms a step and launches a step" << (markdown ? "**" : "") << "\n\n";
  if (markdown) {
    lab::table_row(o, {"model", "context", "implementation", "kernel", "ms", "launches"}, true);
    lab::table_row(o, {"---", "---:", "---", "---", "---:", "---:"}, true);
  }
  for (const auto& r : rows)
    for (const auto& impl : impls) {
      const auto it = r.profile.find(impl.name);
      if (it == r.profile.end() || !it->second.not_run.empty()) continue;
      std::vector<std::pair<std::string, Breakdown::Part>> parts(it->second.rest.begin(), it->second.rest.end());
      std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
      if (parts.size() > top) parts.resize(top);
      for (const auto& [name, part] : parts) {
        lab::table_row(o,
                       {r.size.name, std::to_string(r.context), impl.name, markdown ? "`" + name + "`" : name,
                        fixed(part.ms, 3), fixed(part.launches, 0)},
                       markdown);
      }
    }
  return o.str();
}

// Every implementation against the double reference at the topic's check shapes, before any time.
void check_all(const std::vector<Implementation>& impls, const Settings& cfg) {
  lab::Stream stream;
  int checked = 0;
  std::size_t done = 0;
  for (const auto& impl : impls) {
    // Progress: the double reference runs on the CPU, tens of seconds an implementation.
    std::fprintf(stderr, "[check %zu/%zu] %s\n", ++done, impls.size(), impl.name.c_str());
    for (const lab::Shape& s : Gpt2Step::checks()) {
      if (!lab::unsupported(*impl.variant, s).empty()) continue;
      const lab::Verdict v = lab::check_variant(*impl.variant, s, cfg.seed, stream);
      if (!v.pass) throw lab::Error(impl.name + " fails its check at " + s.str() + ": " + v.details());
      ++checked;
    }
  }
  std::cerr << "checked: " << impls.size() << (impls.size() == 1 ? " implementation passes " : " implementations pass ")
            << checked << " check shapes against the double reference\n";
}

Size size_named(const std::string& name, const char* flag) {
  const std::vector<Size> known = known_sizes();
  auto it = std::find_if(known.begin(), known.end(), [&](const Size& s) { return s.name == name; });
  if (it == known.end()) {
    std::vector<std::string> names;
    for (const auto& s : known) names.push_back(s.name);
    throw lab::UsageError(std::string(flag) + " " + name + ": no such model size (known: " + join(names) + ")");
  }
  return *it;
}

// The configurations to run: --configs' pairs, else every size at every context.
std::vector<std::pair<Size, int>> configurations(const Settings& cfg) {
  std::vector<std::pair<Size, int>> out;
  if (!cfg.configs.empty()) {
    for (const auto& pair : cfg.configs) {
      const auto colon = pair.find(':');
      int ctx = 0;
      try {
        std::size_t used = 0;
        ctx = colon == std::string::npos ? 0 : std::stoi(pair.substr(colon + 1), &used);
        if (colon != std::string::npos && used != pair.size() - colon - 1) ctx = 0;
      } catch (const std::exception&) {
        ctx = 0;
      }
      if (ctx < 1 || ctx > 1024)
        throw lab::UsageError("--configs " + pair + ": expected SIZE:CONTEXT, a context from 1 to 1024 (small:1024)");
      out.emplace_back(size_named(pair.substr(0, colon), "--configs"), ctx);
    }
  } else {
    for (const auto& name : cfg.sizes)
      for (auto ctx : cfg.contexts) out.emplace_back(size_named(name, "--sizes"), int(ctx));
  }
  for (const auto& [s, ctx] : out)
    for (Phase p : kPhases)
      if (const std::string why = Gpt2Step::validate(shape_of(s, ctx, cfg, p)); !why.empty())
        throw lab::UsageError(s.name + " at context " + std::to_string(ctx) + ": " + why);
  return out;
}

// The fields of a CSV line (the report quotes nothing: no field it writes holds a comma).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const auto comma = line.find(',', start);
    out.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

double csv_number(const std::string& field, const std::string& where) {
  try {
    std::size_t used = 0;
    const double x = std::stod(field, &used);
    if (used == field.size() && std::isfinite(x)) return x;
  } catch (const std::exception&) {
  }
  throw lab::UsageError(where + ": '" + field + "' is not a number");
}

// --resume without --variants: the implementations the CSV's header names, in its order (from its
// forward_X_status columns, which every file with status columns has), or none (all: the default)
// where there is no file, it is empty, or it has no status columns (kept_rows then says why).
// A line of the CSV without its '\r' (a file written on Windows); false at its end.
bool csv_line_of(std::istream& in, std::string& line) {
  if (!std::getline(in, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

std::vector<std::string> variants_in_csv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !csv_line_of(in, line)) return {};
  const std::string lead = std::string(gpt2::phase_name(Phase::forward)) + "_", tail = "_status";
  std::vector<std::string> names;
  for (const std::string& col : csv_fields(line))
    if (col.size() > lead.size() + tail.size() && col.starts_with(lead) && col.ends_with(tail))
      names.push_back(col.substr(lead.size(), col.size() - lead.size() - tail.size()));
  return names;
}

// --resume: the rows of the CSV an earlier run wrote, checked before anything runs: this run's
// columns (the same implementations in the same order), known sizes, contexts 1 to 1024, each
// configuration once, the parameter count this run's --vocab gives, a status of ok, OOM, N/A or
// empty, and a time for every ok. No file, or an empty one: nothing kept.
std::vector<Row> kept_rows(const Settings& cfg, const std::vector<Implementation>& impls) {
  std::ifstream in(cfg.csv);
  std::string line;
  if (!in || !csv_line_of(in, line)) return {};
  const std::vector<std::string> names = names_of(impls);
  const std::string header = csv_header(names);
  const std::string where = "--resume: " + cfg.csv;
  if (header.starts_with(line + ","))  // the columns before the status ones: a file of an older report
    throw lab::UsageError(where + ": it has no status columns (P_X_status), which this report has written since "
                          "2026-11-28: it cannot tell an OOM cell from one not run; measure its configurations again");
  if (line != header)
    throw lab::UsageError(where + ": its columns are another run's (" + std::to_string(csv_fields(line).size()) +
                          " columns; this run writes " + std::to_string(csv_fields(header).size()) + ", for " +
                          join(names) + "): resume without --variants (the file's), or with those of the run that "
                          "wrote it");
  const std::vector<std::string> columns = csv_fields(header);
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < columns.size(); ++i) column[columns[i]] = i;
  std::vector<Row> rows;
  for (int number = 2; csv_line_of(in, line); ++number) {
    if (line.empty()) continue;
    const std::string at = where + ", line " + std::to_string(number);
    const std::vector<std::string> f = csv_fields(line);
    if (f.size() != columns.size())
      throw lab::UsageError(at + ": " + std::to_string(f.size()) + " fields, where the header has " +
                            std::to_string(columns.size()));
    Row r;
    r.size = size_named(f[0], (at + ": model_size").c_str());
    const double context = csv_number(f[1], at + ": context_length");
    if (context != std::floor(context) || context < 1 || context > 1024)
      throw lab::UsageError(at + ": context_length " + f[1] + " is not a whole number from 1 to 1024");
    r.context = static_cast<int>(context);
    for (const Row& k : rows)
      if (k.size.name == r.size.name && k.context == r.context)
        throw lab::UsageError(at + ": " + r.size.name + " at context " + f[1] + " again");
    r.params = gpt2::param_count(config_of(r, cfg));
    if (f[2] != std::to_string(r.params))
      throw lab::UsageError(at + ": " + f[2] + " parameters, where --vocab " + std::to_string(cfg.vocab) + " gives " +
                            std::to_string(r.params) + ": resume with the --vocab of the run that wrote it");
    for (Phase p : kPhases)
      for (const auto& x : names) {
        const std::string col = std::string(gpt2::phase_name(p)) + "_" + x;
        const std::string& state = f[column.at(col + "_status")];
        Cell c;
        if (state == "ok") {
          c.m.ms = csv_number(f[column.at(col + "_ms")], at + ": " + col + "_ms");
          if (const std::string& mib = f[column.at(col + "_peak_mib")]; !mib.empty())
            c.m.peak_mib = csv_number(mib, at + ": " + col + "_peak_mib");
        } else if (state == "OOM") {
          c.m.oom = true;
        } else if (state == "N/A") {
          c.m.not_applicable = "N/A in " + cfg.csv;
        } else if (state.empty()) {
          continue;  // not run
        } else {
          throw lab::UsageError(at + ": " + col + "_status '" + state + "' is none of ok, OOM, N/A");
        }
        if (const std::string& mfu = f[column.at(col + "_mfu_pct")]; !mfu.empty())
          r.kept_mfu[{p, x}] = csv_number(mfu, at + ": " + col + "_mfu_pct");
        r.cells[{p, x}] = std::move(c);
      }
    r.kept_line = line;
    rows.push_back(std::move(r));
  }
  return rows;
}

void write_csv(const std::vector<Row>& rows, const std::vector<Implementation>& impls, const Settings& cfg,
               const Rates& rates) {
  std::string text = csv_header(names_of(impls)) + "\n";
  for (const auto& r : rows) text += csv_line(r, impls, cfg, rates) + "\n";
  lab::write_output(cfg.csv, text, std::to_string(rows.size()) + (rows.size() == 1 ? " row" : " rows"));
}

// The Markdown file: its first line says where the rows come from, then the tables.
void write_markdown(const std::vector<Row>& rows, std::size_t kept, const std::vector<Implementation>& impls,
                    const Settings& cfg, const Rates& rates, const std::string& device) {
  const std::string runs = "median of " + std::to_string(cfg.reps) + " runs after " + std::to_string(cfg.warmup) +
                           " untimed, L2 flushed before each";
  const std::string kept_note =
      kept == 0 ? ""
                : " " + std::to_string(kept) + (kept == 1 ? " row" : " rows") + " kept from " + cfg.csv +
                      " (--resume) as the run that wrote " + (kept == 1 ? "it" : "them") + " measured " +
                      (kept == 1 ? "it" : "them") + ", its MFU included.";
  std::string head;
  if (device.empty())
    head = "Measured by `demo_gpt2_report` in the runs that wrote " + cfg.csv +
           ", every row kept by `--resume`: batch " + std::to_string(cfg.batch) + ", vocabulary " +
           std::to_string(cfg.vocab) +
           " (as given: the CSV records the parameter count, not the batch, the repetitions or the device); each row "
           "as the run that wrote it measured it, its MFU against that run's measured cuBLAS rate.\n";
  else
    head = "Measured by `demo_gpt2_report` on " + device + ": batch " + std::to_string(cfg.batch) + ", vocabulary " +
           std::to_string(cfg.vocab) + ", " + runs +
           "; MFU against the measured rate of cuBLAS's GEMM in the implementation's precision: SGEMM " +
           fixed(rates.fp32, 1) + " TFLOP/s (fp32, 3xTF32), bf16 " + fixed(rates.bf16, 1) +
           " TFLOP/s (bf16 operands, fp32 accumulation)." + kept_note + "\n";
  lab::write_output(cfg.markdown,
                    head + tables(rows, impls, cfg, rates, true) +
                        (cfg.profile ? breakdown_table(rows, impls, true) + rest_table(rows, impls, true) : ""),
                    "the tables");
}

int run(const Settings& cfg) {
  const bool variants_from_csv = cfg.resume && cfg.variants.empty() && !cfg.csv.empty();
  const std::vector<std::string> wanted = variants_from_csv ? variants_in_csv(cfg.csv) : cfg.variants;
  const std::vector<Implementation> impls =
      implementations(wanted, variants_from_csv ? "--resume: " + cfg.csv + " names" : "--variants");
  if (variants_from_csv && !wanted.empty())
    std::cerr << "--resume: the implementations " << cfg.csv << " names: " << join(wanted) << "\n";
  const std::vector<std::pair<Size, int>> configs = configurations(cfg);
  if (cfg.resume && cfg.csv.empty()) throw lab::UsageError("--resume needs --csv FILE: the file whose rows it keeps");
  if (cfg.resume && !cfg.dump.empty()) throw lab::UsageError("--resume with --dump: --dump times nothing to resume");
  std::vector<Row> rows = cfg.resume ? kept_rows(cfg, impls) : std::vector<Row>{};
  const std::size_t kept = rows.size();
  const auto is_kept = [&](const Size& s, int ctx) {
    return std::any_of(rows.begin(), rows.begin() + kept,
                       [&](const Row& r) { return r.size.name == s.name && r.context == ctx; });
  };
  const std::size_t to_measure =
      std::count_if(configs.begin(), configs.end(), [&](const auto& c) { return !is_kept(c.first, c.second); });
  for (const std::string& path : {cfg.csv, cfg.markdown})  // before the run, not after it
    lab::check_writable(path);
  if (cfg.resume && to_measure == 0) {  // every configuration is in the file: its tables, no device
    std::cerr << "gpt2 report: all " << configs.size() << " configurations are in " << cfg.csv
              << " (--resume): nothing to measure; the tables of its " << kept << " rows\n";
    std::cout << tables(rows, impls, cfg, Rates{}, false);
    if (!cfg.markdown.empty()) write_markdown(rows, kept, impls, cfg, Rates{}, "");
    return lab::kExitOk;
  }

  if (!cfg.dump.empty() && configs.size() != 1)
    throw lab::UsageError("--dump takes one configuration: one --sizes and one --contexts, or one --configs");
  const lab::DeviceFacts dev = lab::init_device();
  std::cerr << dev.describe() << "\n";
  if (!cfg.dump.empty()) {
    std::vector<std::pair<std::string, const lab::Variant*>> named;
    for (const auto& impl : impls) named.emplace_back(impl.name, impl.variant);
    const auto& [size, context] = configs[0];
    return gpt2::report::dump(cfg.dump, size.name, shape_of(size, context, cfg, Phase::step), cfg.seed, named);
  }
  if (!cfg.no_check) check_all(impls, cfg);
  const Rates rates{lab::measure_sgemm_tflops(), lab::measure_bf16_gemm_tflops()};
  std::cerr << "cuBLAS 8192^3, the MFU denominators: SGEMM (fp32, no TF32) " << fixed(rates.fp32, 1)
            << " TFLOP/s; bf16 operands, fp32 accumulation " << fixed(rates.bf16, 1) << " TFLOP/s\n";
  lab::L2Flusher flusher(dev.l2_bytes, dev.sms);
  std::vector<std::string> names;
  for (const auto& i : impls) names.push_back(i.name);
  const std::size_t total = configs.size() * impls.size() * 3;
  std::cerr << "gpt2 report: " << configs.size() << " configurations x " << impls.size() << " implementations ("
            << join(names) << ") x 3 phases, batch " << cfg.batch
            << ", vocabulary " << cfg.vocab << ", median of " << cfg.reps << " runs after " << cfg.warmup
            << " untimed, L2 flushed before each timed one\n";
  if (kept)
    std::cerr << "--resume: " << kept << (kept == 1 ? " row" : " rows") << " kept from " << cfg.csv << ", "
              << to_measure << " of " << configs.size() << " configurations to measure\n";
  std::size_t done = 0;
  for (const auto& [s, ctx] : configs) {
    if (is_kept(s, ctx)) {
      done += impls.size() * 3;
      std::fprintf(stderr, "[%zu/%zu] %s ctx %d: kept from %s\n", done, total, s.name.c_str(), ctx, cfg.csv.c_str());
      continue;
    }
    Row r{s, ctx, gpt2::param_count({s.layers, s.d, s.heads, ctx, cfg.batch, cfg.vocab}), {}, {}, {}, {}};
    for (Phase p : kPhases)
      for (const auto& impl : impls) {
        Cell c{lab::measure_variant(*impl.variant, shape_of(s, ctx, cfg, p), cfg.seed, cfg.reps, flusher, false,
                                    cfg.warmup)};
        const std::string what = !c.m.not_applicable.empty() ? "N/A (" + c.m.not_applicable + ")"
                                 : c.m.oom                   ? std::string("OOM")
                                                             : fixed(*c.m.ms, 3) + " ms, " +
                                                 fixed(c.m.peak_mib.value_or(0), 0) + " MiB";
        std::fprintf(stderr, "[%zu/%zu] %s ctx %d %s %s: %s\n", ++done, total, s.name.c_str(), ctx,
                     gpt2::phase_name(p), impl.name.c_str(), what.c_str());
        r.cells[{p, impl.name}] = std::move(c);
      }
    if (cfg.profile)
      for (const auto& impl : impls) {
        const lab::Shape step = shape_of(s, ctx, cfg, Phase::step);
        const Breakdown& b = r.profile[impl.name] = gpt2::report::profile_step(*impl.variant, step, cfg.seed);
        std::fprintf(stderr, "profiled %s ctx %d full_step %s: %s\n", s.name.c_str(), ctx, impl.name.c_str(),
                     b.not_run.empty() ? (fixed(b.step_ms, 3) + " ms a step").c_str() : b.not_run.c_str());
      }
    rows.push_back(std::move(r));
    if (!cfg.csv.empty()) write_csv(rows, impls, cfg, rates);  // after every configuration: a cut run keeps them
  }

  std::cout << tables(rows, impls, cfg, rates, false);
  if (cfg.profile) std::cout << breakdown_table(rows, impls, false) << rest_table(rows, impls, false);
  if (!cfg.markdown.empty()) write_markdown(rows, kept, impls, cfg, rates, dev.name);
  return lab::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Settings cfg;
  return lab::demo_main(
      argc, argv, {"demo_gpt2_report", Gpt2Step::name, kDescription, 4},
      [&](CLI::App& app) {
        app.add_option("--sizes", cfg.sizes, "model sizes: small, medium, large, xl, 2.7B, tiny (default the five)")
            ->delimiter(',');
        app.add_option("--contexts", cfg.contexts, "context lengths, at most 1024 (default 128,256,512,1024)")
            ->delimiter(',')
            ->check(CLI::Range(1, 1024));
        app.add_option("--configs", cfg.configs,
                       "size:context pairs instead of every size at every context (e.g. the targets: "
                       "small:1024,medium:512,xl:256,2.7B:128)")
            ->delimiter(',');
        app.add_option("--variants", cfg.variants,
                       "implementations to run, by the name after gpt2_step_ (default all: vanilla, compiled, "
                       "fused, fused_3xtf32, fused_tc_attention, fused_bf16, ...)")
            ->delimiter(',');
        app.add_option("--batch", cfg.batch, "batch size (default 4)")->check(CLI::Range(1, 1 << 20));
        app.add_option("--vocab", cfg.vocab, "vocabulary size (default 10000)")->check(CLI::Range(1, 1 << 30));
        app.add_option("--warmup", cfg.warmup, "untimed runs before each measurement's timed ones (default 3)")
            ->check(CLI::Range(0, 100000));
        app.add_option("--reps", cfg.reps, "timed runs per measurement, the median reported (default 5)")
            ->check(CLI::Range(1, 100000));
        app.add_flag("--no-check", cfg.no_check, "skip the check against the double reference before timing");
        app.add_flag("--profile", cfg.profile,
                     "after the timing, where one full step's GPU time goes (CUPTI): matrix products, attention, "
                     "AdamW, the rest, for each configuration and implementation");
        app.add_option("--seed", cfg.seed, "seed of the weights and data (default 1)")->check(lab::cli::seed());
        app.add_option("--csv", cfg.csv,
                       "write the rows to this CSV file (the benchmark's columns first), again after every "
                       "configuration")
            ->check(lab::cli::output_file());
        app.add_flag("--resume", cfg.resume,
                     "keep the rows of the --csv file (an earlier run's, maybe cut short) and measure only the "
                     "configurations it lacks, with the implementations the file names (--variants, if given, "
                     "must be those); give the --vocab, --batch and --reps of the run that wrote it. With every "
                     "configuration in the file: its tables, no GPU");
        app.add_option("--markdown", cfg.markdown, "write the tables to this Markdown file")
            ->check(lab::cli::output_file());
        app.add_option("--dump", cfg.dump,
                       "write one configuration's inputs and each implementation's full-step outputs to this "
                       "folder (for tools/torch_gpt2.py --check), and time nothing")
            ->check(lab::cli::output_dir());
      },
      [&] { return run(cfg); });
}
