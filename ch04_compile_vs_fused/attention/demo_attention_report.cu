// Demo: the attention report, the C++ counterpart of the users' compiled-attention benchmark. For
// every shape of the grid (batch x heads x seq x d, causal or not) and every implementation in
// this chapter (vanilla = the baseline, compiled, fused, ...: a forward variant and the backward
// variant of the same role and step), it times the forward and the backward apart and writes one
// CSV row:
//   batch_size, heads, seq_len, d_model, causal, variant, compiled, forward_ms, forward_mean_ms,
//   forward_std_ms, backward_ms, backward_mean_ms, backward_std_ms, total_ms, total_mean_ms,
//   forward_tflops, backward_tflops, peak_memory_mb, status, verified
// then prints speedup tables (forward, backward, total) over vanilla, as text and as Markdown.
// The users' benchmark (its CSV: batch_size, seq_len, d_model, compiled, forward_mean_ms,
// forward_std_ms, backward_mean_ms, backward_std_ms, total_mean_ms, peak_memory_mb, status) is the
// defaults: batch 8, one head, seq 256 to 16384, d 16 to 128, 10 warm-up runs and 100 timed.
//   compiled     the users' flag: false for vanilla, true for every other implementation (the
//                users compare two; `variant` names which of the lab's it is)
//   forward_ms, backward_ms  median of --reps runs after --warmup untimed ones, CUDA events, the
//                L2 flushed before each run; *_mean_ms and *_std_ms their mean and sample standard
//                deviation (the users' statistics; the tables use the median, which one slow run
//                does not move); total_ms, total_mean_ms: the two directions' sums
//   *_tflops     4 B H seq^2 d FLOPs forward, 2.5 times that backward (half with the causal mask)
//   peak_memory_mb  the larger of the forward's and the backward's peak of device memory held by
//                the lab's buffers (inputs, outputs, saved tensors, scratch; MiB = 2^20 bytes)
//   status       success (the users' word), OOM when a direction ran out of device memory (the
//                report goes on), or N/A where the implementation does not run the shape
// Shapes whose forward is at most --verify-gflop GFLOP are checked against the double reference
// first (forward and backward), so a wrong kernel cannot report a time.
// Run: make ch04 && ./ch04_compile_vs_fused/demo_attention_report --csv attention.csv
// ctest-args: --batch 2 --seq 33,64 --d 16,64 --causal 0,1 --warmup 1 --reps 2
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "attention/attention.cuh"
#include "lab/demo.hpp"
#include "lab/device.hpp"
#include "lab/harness.hpp"

namespace {

using lab::fixed;
using lab::join;

constexpr const char* kDescription =
    "the attention report: every implementation's forward and backward over batch x heads x seq x d, CSV and "
    "speedup tables";

struct Settings {
  std::vector<std::int64_t> batch{8}, heads{1}, seq{256, 1024, 4096, 8192, 16384}, d{16, 32, 64, 128}, causal{0};
  std::vector<std::string> variants;  // empty: all
  int warmup = 10, reps = 100;  // the users' benchmark's
  double verify_gflop = 0.5;
  std::string csv, markdown;
  std::uint64_t seed = 1;
};

// A forward variant and its backward, paired by name; an implementation may have no backward
// (fused_3xtf32: the forward only).
struct Implementation {
  std::string name;  // vanilla, compiled, fused, ...
  const lab::Variant* forward = nullptr;
  const lab::Variant* backward = nullptr;  // null: none
};

// optimized_attention_fused and optimized_attention_backward_fused -> fused; baselines -> vanilla.
std::string label(const lab::Variant& v) {
  if (v.role == lab::Role::baseline) return "vanilla";
  std::string rest = v.program;  // what follows "attention", less a leading "_backward" and "_"
  const std::string topic = "attention";
  if (const auto at = rest.find(topic); at != std::string::npos) rest.erase(0, at + topic.size());
  for (const std::string lead : {"_backward", "_"})
    if (rest.starts_with(lead)) rest.erase(0, lead.size());
  return rest.empty() ? lab::role_name(v.role) : rest;
}

std::vector<Implementation> implementations() {
  std::vector<Implementation> out;
  for (const lab::Variant* f : lab::Registry::global().of_topic(Attention::name)) {
    Implementation impl{label(*f), f, nullptr};
    for (const lab::Variant* b : lab::Registry::global().of_topic(AttentionBackward::name))
      if (label(*b) == impl.name) impl.backward = b;
    out.push_back(impl);
  }
  return out;
}

// One direction of one implementation at one shape; verified when the forward is small enough.
lab::Measurement measure(const lab::Variant& v, const lab::Shape& shape, const Settings& cfg, lab::L2Flusher& flusher) {
  const bool verify = Attention::work(shape).flops <= cfg.verify_gflop * 1e9;
  return lab::measure_variant(v, shape, cfg.seed, cfg.reps, flusher, verify, cfg.warmup);
}

struct Row {
  lab::Shape shape;
  std::string variant;
  bool has_backward = true;
  lab::Measurement fwd, bwd;
  std::optional<double> total() const {
    if (fwd.ms && bwd.ms) return *fwd.ms + *bwd.ms;
    return std::nullopt;
  }
  std::optional<double> total_mean() const {
    if (fwd.mean_ms && bwd.mean_ms) return *fwd.mean_ms + *bwd.mean_ms;
    return std::nullopt;
  }
  bool compiled() const { return variant != "vanilla"; }
  std::string status() const {
    return !fwd.not_applicable.empty() ? "N/A" : fwd.oom || bwd.oom ? "OOM" : "success";
  }
  bool verified() const { return fwd.verified && (bwd.verified || !has_backward); }
  // A table cell for direction t (0 forward, 1 backward, 2 total): "OOM" where that ran out of
  // memory, "N/A" where the implementation does not run the shape, "-" where there is nothing to
  // time (no backward).
  std::string missing(int t) const {
    const bool oom = t == 0 ? fwd.oom : t == 1 ? bwd.oom : fwd.oom || bwd.oom;
    const bool na = t == 0 ? !fwd.not_applicable.empty() : t == 1 ? !bwd.not_applicable.empty()
                                                                   : !fwd.not_applicable.empty();
    return oom ? "OOM" : na ? "N/A" : "-";
  }
};

std::string csv_line(const Row& r) {
  auto opt = [](const std::optional<double>& x, int dec) { return x ? fixed(*x, dec) : std::string(); };
  const double fl = Attention::work(r.shape).flops;
  std::optional<double> ftf, btf, mem;
  if (r.fwd.ms) ftf = fl / (*r.fwd.ms * 1e-3) / 1e12;
  if (r.bwd.ms) btf = 2.5 * fl / (*r.bwd.ms * 1e-3) / 1e12;
  if (r.fwd.peak_mib || r.bwd.peak_mib) mem = std::max(r.fwd.peak_mib.value_or(0), r.bwd.peak_mib.value_or(0));
  std::ostringstream s;
  s << r.shape[0] << "," << r.shape[1] << "," << r.shape[2] << "," << r.shape[3] << "," << r.shape[4] << ","
    << r.variant << "," << (r.compiled() ? "true" : "false") << "," << opt(r.fwd.ms, 4) << ","
    << opt(r.fwd.mean_ms, 4) << "," << opt(r.fwd.std_ms, 4) << "," << opt(r.bwd.ms, 4) << ","
    << opt(r.bwd.mean_ms, 4) << "," << opt(r.bwd.std_ms, 4) << "," << opt(r.total(), 4) << ","
    << opt(r.total_mean(), 4) << "," << opt(ftf, 2) << "," << opt(btf, 2) << "," << opt(mem, 1) << ","
    << r.status() << "," << (r.verified() ? "true" : "false");
  return s.str();
}

// Speedup over vanilla of each implementation, one table per direction: a row per shape.
std::string tables(const std::vector<Row>& rows, const std::vector<std::string>& names, bool markdown) {
  std::ostringstream o;
  std::vector<lab::Shape> shapes;
  for (const auto& r : rows)
    if (std::find(shapes.begin(), shapes.end(), r.shape) == shapes.end()) shapes.push_back(r.shape);
  auto find = [&](const lab::Shape& s, const std::string& v) -> const Row* {
    for (const auto& r : rows)
      if (r.shape == s && r.variant == v) return &r;
    return nullptr;
  };
  const char* what[] = {"forward", "backward", "total (forward + backward)"};
  for (int t = 0; t < 3; ++t) {
    auto time = [&](const Row* r) -> std::optional<double> {
      if (!r) return std::nullopt;
      return t == 0 ? r->fwd.ms : t == 1 ? r->bwd.ms : r->total();
    };
    o << "\n" << (markdown ? "**" : "") << what[t] << ": ms, and speedup over vanilla" << (markdown ? "**" : "") << "\n\n";
    std::vector<std::string> head{"batch", "heads", "seq", "d", "causal"};
    for (const auto& n : names) head.push_back(n + " ms");
    for (const auto& n : names)
      if (n != "vanilla") head.push_back(n + " speedup");
    head.push_back("peak MiB (" + join(names, " / ") + ")");
    auto line = [&](const std::vector<std::string>& cells) { lab::table_row(o, cells, markdown); };
    line(head);
    if (markdown) line(std::vector<std::string>(head.size(), "---:"));
    for (const auto& s : shapes) {
      std::vector<std::string> cells;
      for (std::size_t i = 0; i < 5; ++i) cells.push_back(std::to_string(s[i]));
      const auto base = time(find(s, "vanilla"));
      for (const auto& n : names) {
        const Row* r = find(s, n);
        const auto x = time(r);
        cells.push_back(x ? fixed(*x, 3) : r ? r->missing(t) : "-");
      }
      for (const auto& n : names) {
        if (n == "vanilla") continue;
        const auto x = time(find(s, n));
        cells.push_back(x && base ? fixed(*base / *x, 2) + "x" : "-");
      }
      std::string mem;
      for (const auto& n : names) {
        const Row* r = find(s, n);
        const auto m = r ? std::max(r->fwd.peak_mib.value_or(0), r->bwd.peak_mib.value_or(0)) : 0.0;
        mem += (mem.empty() ? "" : " / ") + (r && (r->fwd.peak_mib || r->bwd.peak_mib) ? fixed(m, 0) : std::string("-"));
      }
      cells.push_back(mem);
      line(cells);
    }
  }
  return o.str();
}

int run(const Settings& cfg) {
  std::vector<Implementation> impls = implementations();
  std::vector<std::string> known;
  for (const auto& i : impls) known.push_back(i.name);
  if (!cfg.variants.empty()) {
    for (const auto& v : cfg.variants)
      if (std::find(known.begin(), known.end(), v) == known.end())
        throw lab::UsageError("--variants " + v + ": no such implementation (known: " + join(known) + ")");
    std::erase_if(impls, [&](const Implementation& i) {
      return std::find(cfg.variants.begin(), cfg.variants.end(), i.name) == cfg.variants.end();
    });
  }
  std::vector<lab::Shape> shapes;
  for (auto b : cfg.batch)
    for (auto h : cfg.heads)
      for (auto c : cfg.causal)
        for (auto d : cfg.d)
          for (auto s : cfg.seq) {
            const lab::Shape shape{b, h, s, d, c};
            if (const std::string why = Attention::validate(shape); !why.empty())
              throw lab::UsageError("shape " + shape.str() + " (batch x heads x seq x d x causal): " + why);
            shapes.push_back(shape);
          }
  for (const std::string& path : {cfg.csv, cfg.markdown})  // before the run, not after it
    lab::check_writable(path);

  const lab::DeviceFacts dev = lab::init_device();
  lab::L2Flusher flusher(dev.l2_bytes, dev.sms);
  const std::size_t total = shapes.size() * impls.size();
  std::vector<std::string> names;
  for (const auto& i : impls) names.push_back(i.name);
  std::cerr << dev.describe() << "\n"
            << "attention report: " << shapes.size() << " shapes x " << impls.size() << " implementations ("
            << join(names) << "), forward and backward, median of " << cfg.reps << " runs each after "
            << cfg.warmup << " untimed, L2 flushed before every timed run\n";
  std::vector<Row> rows;
  std::size_t done = 0;
  for (const auto& shape : shapes)
    for (const auto& impl : impls) {
      Row r{shape, impl.name, impl.backward != nullptr, measure(*impl.forward, shape, cfg, flusher), {}};
      if (impl.backward) r.bwd = measure(*impl.backward, shape, cfg, flusher);
      auto ms = [](const lab::Measurement& m, bool ran) {
        if (!ran) return std::string("none");
        if (!m.not_applicable.empty()) return "N/A (" + m.not_applicable + ")";
        return m.ms ? fixed(*m.ms, 3) + " ms" : std::string("OOM");
      };
      std::fprintf(stderr, "[%zu/%zu] %s %s: forward %s, backward %s%s\n", ++done, total, shape.str().c_str(),
                   impl.name.c_str(), ms(r.fwd, true).c_str(), ms(r.bwd, r.has_backward).c_str(),
                   r.verified() ? ", verified" : "");
      rows.push_back(std::move(r));
    }

  std::cout << tables(rows, names, false);
  const std::string header =
      "batch_size,heads,seq_len,d_model,causal,variant,compiled,forward_ms,forward_mean_ms,forward_std_ms,"
      "backward_ms,backward_mean_ms,backward_std_ms,total_ms,total_mean_ms,forward_tflops,backward_tflops,"
      "peak_memory_mb,status,verified";
  if (!cfg.csv.empty()) {
    std::string text = header + "\n";
    for (const auto& r : rows) text += csv_line(r) + "\n";
    lab::write_output(cfg.csv, text, std::to_string(rows.size()) + " rows");
  }
  if (!cfg.markdown.empty())
    lab::write_output(cfg.markdown,
                      "Measured by `demo_attention_report` on " + dev.name + ": median of " + std::to_string(cfg.reps) +
                          " runs after " + std::to_string(cfg.warmup) + " untimed, L2 flushed before each.\n" +
                          tables(rows, names, true),
                      "the tables");
  return lab::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Settings cfg;
  return lab::demo_main(
      argc, argv, {"demo_attention_report", "attention", kDescription, 4},
      [&](CLI::App& app) {
        const auto positive = CLI::Range(std::int64_t{1}, std::int64_t{1} << 30);
        app.add_option("--batch", cfg.batch, "batch sizes, comma-separated (default 8)")->delimiter(',')->check(positive);
        app.add_option("--heads", cfg.heads, "head counts (default 1)")->delimiter(',')->check(positive);
        app.add_option("--seq", cfg.seq, "sequence lengths (default 256,1024,4096,8192,16384)")
            ->delimiter(',')
            ->check(positive);
        app.add_option("--d", cfg.d, "head dimensions: 16, 32, 64, 128 (default all four)")
            ->delimiter(',')
            ->check(CLI::IsMember({16, 32, 64, 128}));
        app.add_option("--causal", cfg.causal, "0 (no mask), 1 (causal) or 0,1 (default 0)")
            ->delimiter(',')
            ->check(CLI::Range(0, 1));
        app.add_option("--variants", cfg.variants, "implementations to run (default all: vanilla, compiled, fused, ...)")
            ->delimiter(',');
        app.add_option("--warmup", cfg.warmup, "untimed runs before each measurement's timed ones (default 10)")
            ->check(CLI::Range(0, 100000));
        app.add_option("--reps", cfg.reps,
                       "timed runs per measurement: their median, mean and standard deviation reported (default 100)")
            ->check(CLI::Range(1, 100000));
        app.add_option("--verify-gflop", cfg.verify_gflop,
                       "check forward and backward against the double reference when the forward is at most this "
                       "many GFLOP (default 0.5; 0: never)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--seed", cfg.seed, "seed of the inputs (default 1)")->check(lab::cli::seed());
        app.add_option("--csv", cfg.csv, "write the rows to this CSV file")->check(lab::cli::output_file());
        app.add_option("--markdown", cfg.markdown, "write the speedup tables to this Markdown file")
            ->check(lab::cli::output_file());
      },
      [&] { return run(cfg); });
}
