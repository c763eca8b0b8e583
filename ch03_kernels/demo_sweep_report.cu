// Demo: the sweep report, the C++ counterpart of the benchmark our users ran in Python. For each
// operation (LayerNorm, GELU, Swish and the losses by default) and each of its implementations in
// this chapter (baseline, optimized, library), over batch x sequence x dimension, it times the
// operation and writes one JSON record per measurement:
//   {operation, implementation, program, batch_size, sequence_length, tensor_dimension, time_ms,
//    memory_mb, inference_speed, gpu_efficiency, throughput_gbps, peak_gbps, same_size_copy_gbps,
//    written_bytes, floor_gbps, share_of_floor, verified, status}
// and prints a table per operation (each implementation's time, GB/s, efficiency and share of its
// floor, the floor itself, the speedup, and memory_mb). The definitions (also in the chapter README):
//   time_ms          median of --reps runs, each timed with CUDA events after an L2 flush
//   throughput_gbps  the operation's minimal bytes (each input read once, each output written
//                    once: the topic's work count) over time_ms, in GB/s (10^9 bytes/s)
//   gpu_efficiency   throughput_gbps over peak_gbps, in percent: achieved over the measured peak
//                    of the resource that bounds these operations, device memory bandwidth
//                    (peak_gbps = this GPU's measured device-to-device copy rate). It is not
//                    "GPU utilization": a kernel at 100% moves bytes as fast as a copy does.
//   memory_mb        the most device memory the operation's buffers (inputs, outputs, scratch)
//                    held at once, in MiB (2^20 bytes); the CUDA context and libraries excluded
//   inference_speed  calls per second, 1000 / time_ms, as the users' guide defines it
//   same_size_copy_gbps  a copy kernel moving the operation's bytes (half read, half written),
//                    timed the same way: what a copy reaches at this size, where a few
//                    microseconds of launch and ramp-up weigh on it as on the operation (a copy
//                    of 16 MB runs at about 70% of peak_gbps on an H100, one of 8 MB at 48%)
//   written_bytes    the part of the operation's bytes that it writes (lab::Work::written)
//   floor_gbps       a plain kernel with the operation's access (lab::move_through: its bytes read
//                    and written in the same proportion, a cross-entropy's a read of its logits, a
//                    GELU's a copy), timed the same way: what moving these bytes this way reaches
//                    at this size
//   share_of_floor   throughput_gbps over floor_gbps, in percent
// A shape maps onto a topic as (batch * seq * dim) elements for the element-wise operations and
// the MSE, and (batch * seq) rows of dim for LayerNorm and the cross-entropy (dim classes).
// Results up to --verify-mb of traffic are checked against the double reference before timing.
// --profile adds, after the sweep, where each implementation's GPU time goes: every measurement
// that ran is run again under CUPTI (3 warm-up runs, then 5 back to back, L2 not flushed, in an
// NVTX range named "profiled OPERATION PROGRAM SHAPE"), and a table per operation and program lists
// its kernels, copies and memsets over its shapes, sorted by total time (the users' guide's
// profiler key_averages table); --trace FILE writes that pass as a Chrome trace (ui.perfetto.dev).
// Run: make ch03 && ./ch03_kernels/demo_sweep_report --json sweep.json && python3 tools/plot_sweep.py sweep.json
// ctest-args: --batch 2 --seq 8 --dim 8,33,768 --reps 3
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/demo.hpp"
#include "lab/device.hpp"
#include "lab/harness.hpp"
#include "lab/lab.hpp"
#include "lab/stats.hpp"

namespace {

using lab::fixed;
using lab::join;

constexpr const char* kDescription =
    "the sweep report: every implementation of LayerNorm, GELU, Swish and the losses over batch x seq x dim";

// The users' grid, and the default subset of it (every operation at its ends and at the
// transformer widths, in a minute or two).
const std::vector<std::int64_t> kFullBatch{16, 32, 64, 128}, kFullSeq{256, 512, 1024, 2048},
    kFullDim{8, 16, 32, 64, 128, 256, 512, 768, 4096};
const std::vector<std::int64_t> kDefaultBatch{32}, kDefaultSeq{512, 2048}, kDefaultDim{8, 64, 512, 768, 4096};
const std::vector<std::string> kDefaultOps{"layernorm", "gelu", "swish", "mse", "cross_entropy"};

struct Settings {
  std::vector<std::string> ops = kDefaultOps;
  std::vector<std::int64_t> batch, seq, dim;
  bool full = false;
  int reps = 10;
  double verify_mb = 256;
  std::string json, trace;
  bool profile = false;
  std::uint64_t seed = 1;
};

constexpr int kProfileWarmup = 3, kProfileRuns = 5;  // --profile's pass, as a program's

struct Record {
  std::string operation, implementation, program, status = "ok";
  std::int64_t batch = 0, seq = 0, dim = 0;
  std::optional<double> time_ms, memory_mb, throughput_gbps, same_size_copy_gbps, floor_gbps;
  double written_bytes = 0;
  bool verified = false;
  bool final_optimized = false;  // the topic's last optimized step: the speedup column's numerator
};

// The topic's shape for batch x seq x dim; throws UsageError for a topic of another rank.
lab::Shape shape_for(const lab::TopicInfo& t, std::int64_t b, std::int64_t s, std::int64_t d) {
  if (t.dims.size() == 1) return lab::Shape{b * s * d};
  if (t.dims.size() == 2) return lab::Shape{b * s, d};
  throw lab::UsageError("--ops " + t.name + ": its shape (" + std::to_string(t.dims.size()) +
                        " dimensions) cannot be built from batch x seq x dim");
}

std::vector<std::string> chapter_topics() {
  std::vector<std::string> names;
  for (const lab::Variant* v : lab::Registry::global().variants())
    if (std::find(names.begin(), names.end(), v->topic->name) == names.end()) names.push_back(v->topic->name);
  return names;
}

// Variants come in topic, role, step order: the last optimized one is the final step.
const lab::Variant* last_optimized(const std::vector<const lab::Variant*>& vs) {
  const lab::Variant* last = nullptr;
  for (const lab::Variant* v : vs)
    if (v->role == lab::Role::optimized) last = v;
  return last;
}

Record measure(const lab::Variant& v, const lab::Shape& shape, const Settings& cfg, lab::L2Flusher& flusher) {
  Record r;
  const lab::Work work = v.topic->work(shape);
  const bool verify = work.bytes <= cfg.verify_mb * 1e6 && v.topic->verifiable(shape);
  const lab::Measurement m = lab::measure_variant(v, shape, cfg.seed, cfg.reps, flusher, verify);
  r.time_ms = m.ms, r.memory_mb = m.peak_mib, r.verified = m.verified;
  if (m.oom) r.status = "OOM";  // this shape does not fit; the sweep goes on
  if (!m.not_applicable.empty()) r.status = "N/A";  // the variant does not run this shape
  if (r.time_ms) r.throughput_gbps = work.bytes / (*r.time_ms * 1e-3) / 1e9;
  return r;
}

// GB/s of a plain kernel that reads `read` bytes and writes `written` (lab::move_through; a copy
// when they are equal), the median of `reps` runs each timed like the operations (events, after an
// L2 flush); one measurement an access. Empty when the buffers do not fit or nothing moves.
class SameAccess {
 public:
  SameAccess(int reps, lab::L2Flusher& flusher) : reps_(reps), flusher_(flusher) {}
  std::optional<double> gbps(double read, double written) {
    const std::size_t r = static_cast<std::size_t>(read) / 16 * 16, w = static_cast<std::size_t>(written) / 16 * 16;
    if (r + w == 0) return std::nullopt;
    if (const auto it = done_.find({r, w}); it != done_.end()) return it->second;
    std::optional<double> rate;
    try {
      lab::DeviceBuffer<std::uint8_t> src(std::max<std::size_t>(r, 16), /*tracked=*/false),
          dst(std::max<std::size_t>(w, 16), /*tracked=*/false);
      lab::DeviceBuffer<int> sink(1, /*tracked=*/false);
      LAB_CHECK(cudaMemsetAsync(src.data(), 0x3C, src.bytes(), stream_));
      const std::vector<double> ms = lab::flushed_samples_ms(
          [&] { lab::move_through(dst.data(), w, src.data(), r, sink.data(), stream_); }, stream_, &flusher_, reps_);
      rate = double(r + w) / (lab::stats::median(ms) * 1e-3) / 1e9;
    } catch (const lab::OutOfMemory&) {
    }
    return done_[{r, w}] = rate;
  }
  // A copy of `bytes` in all: half read, half written.
  std::optional<double> copy_gbps(double bytes) { return gbps(bytes / 2, bytes / 2); }

 private:
  int reps_;
  lab::L2Flusher& flusher_;
  lab::Stream stream_;
  std::map<std::pair<std::size_t, std::size_t>, std::optional<double>> done_;
};

nlohmann::json to_json(const Record& r, double peak_gbps) {
  auto opt = [](const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"operation", r.operation},
                      {"implementation", r.implementation},
                      {"program", r.program},
                      {"batch_size", r.batch},
                      {"sequence_length", r.seq},
                      {"tensor_dimension", r.dim},
                      {"time_ms", opt(r.time_ms)},
                      {"memory_mb", opt(r.memory_mb)},
                      {"inference_speed", r.time_ms ? nlohmann::json(1000.0 / *r.time_ms) : nlohmann::json(nullptr)},
                      {"gpu_efficiency", r.throughput_gbps ? nlohmann::json(100.0 * *r.throughput_gbps / peak_gbps)
                                                           : nlohmann::json(nullptr)},
                      {"throughput_gbps", opt(r.throughput_gbps)},
                      {"peak_gbps", peak_gbps},
                      {"same_size_copy_gbps", opt(r.same_size_copy_gbps)},
                      {"written_bytes", r.written_bytes},
                      {"floor_gbps", opt(r.floor_gbps)},
                      {"share_of_floor", r.throughput_gbps && r.floor_gbps
                                             ? nlohmann::json(100.0 * *r.throughput_gbps / *r.floor_gbps)
                                             : nlohmann::json(nullptr)},
                      {"verified", r.verified},
                      {"status", r.status}};
  return j;
}

// One table per operation: a row per shape, for each implementation its time, GB/s, efficiency and
// share of the floor, the floor (a plain kernel with the same reads and writes: GB/s and
// efficiency), the final optimized variant's speedup over the baseline, and each implementation's
// memory_mb (in the columns' order).
void print_tables(const std::vector<Record>& records, const std::vector<std::string>& ops, double peak_gbps) {
  for (const auto& op : ops) {
    std::vector<std::string> impls;
    for (const auto& r : records)
      if (r.operation == op && std::find(impls.begin(), impls.end(), r.program) == impls.end())
        impls.push_back(r.program);
    if (impls.empty()) continue;
    std::cout << "\n" << op << " (time ms / GB/s / % of the " << fixed(peak_gbps, 0)
              << " GB/s copy / % of the floor, a plain kernel moving the same bytes the same way)\n";
    std::printf("%6s %6s %6s", "batch", "seq", "dim");
    for (const auto& p : impls) std::printf(" | %-34s", p.c_str());
    std::printf(" | %-18s | %-8s | %s\n", "floor, same access", "speedup", "peak MiB, each");
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::map<std::string, const Record*>> rows;
    for (const auto& r : records)
      if (r.operation == op) rows[{r.batch, r.seq, r.dim}][r.program] = &r;
    for (const auto& [key, by_program] : rows) {
      std::printf("%6lld %6lld %6lld", (long long)std::get<0>(key), (long long)std::get<1>(key),
                  (long long)std::get<2>(key));
      std::optional<double> base, best, floor;
      std::string memory;
      for (const auto& p : impls) {
        const auto it = by_program.find(p);
        const bool mb = it != by_program.end() && it->second->memory_mb;
        memory += (memory.empty() ? "" : " / ") + (mb ? fixed(*it->second->memory_mb, 1) : std::string("-"));
      }
      for (const auto& p : impls) {
        const auto it = by_program.find(p);
        if (it == by_program.end() || !it->second->time_ms) {
          std::printf(" | %-34s", it == by_program.end() ? "-" : it->second->status.c_str());
          continue;
        }
        const Record& r = *it->second;
        const std::string cell = fixed(*r.time_ms, 4) + " / " + fixed(*r.throughput_gbps, 0) + " / " +
                                 fixed(100.0 * *r.throughput_gbps / peak_gbps, 1) + "% / " +
                                 (r.floor_gbps ? fixed(100.0 * *r.throughput_gbps / *r.floor_gbps, 0) + "%" : "-");
        std::printf(" | %-34s", cell.c_str());
        if (r.floor_gbps) floor = *r.floor_gbps;
        if (r.implementation == "baseline") base = *r.time_ms;
        if (r.final_optimized) best = *r.time_ms;
      }
      const std::string floor_cell =
          floor ? fixed(*floor, 0) + " / " + fixed(100.0 * *floor / peak_gbps, 1) + "%" : std::string("-");
      std::printf(" | %-18s", floor_cell.c_str());
      const std::string speedup = base && best ? fixed(*base / *best, 2) + "x" : std::string("-");
      std::printf(" | %-8s | %s\n", speedup.c_str(), memory.c_str());
    }
  }
}

// --profile and --trace: every measurement that ran, again under CUPTI (lab::profiled_runs); a
// table per operation and program over its shapes. The trace is written only when the pass is done.
void profile_pass(const std::vector<Record>& records, const std::vector<std::vector<const lab::Variant*>>& variants,
                  const Settings& cfg) {
  std::map<std::string, const lab::Variant*> by_program;
  for (const auto& vs : variants)
    for (const lab::Variant* v : vs) by_program[v->program] = v;
  std::vector<std::pair<std::string, std::string>> order;  // (operation, program), as measured
  std::map<std::pair<std::string, std::string>, std::vector<lab::RunWindow>> windows;
  lab::Stream stream;
  lab::prof::Session session;
  for (const auto& r : records) {
    if (!r.time_ms) continue;  // OOM, N/A: nothing ran
    const lab::Variant& v = *by_program.at(r.program);
    const lab::Shape shape = shape_for(*v.topic, r.batch, r.seq, r.dim);
    const auto key = std::make_pair(r.operation, r.program);
    if (!windows.count(key)) order.push_back(key);
    windows[key].push_back(lab::profiled_runs(v, shape, cfg.seed, stream, kProfileWarmup, kProfileRuns,
                                              r.operation + " " + r.program + " " + shape.str()));
  }
  const std::vector<lab::prof::Record> all = session.stop();
  if (cfg.profile)
    for (const auto& key : order) {
      std::vector<lab::prof::Record> in;
      for (const auto& rec : all)
        for (const auto& w : windows[key])
          if (w.holds(rec)) {
            in.push_back(rec);
            break;
          }
      std::cout << "\nprofile " << key.first << " " << key.second << ": " << kProfileRuns
                << " runs back to back at each of its " << windows[key].size() << " shapes after " << kProfileWarmup
                << " warm-up runs (L2 not flushed), GPU times from CUPTI, sorted by total:\n"
                << lab::prof::format_table(lab::prof::key_averages(in));
    }
  if (!cfg.trace.empty()) {
    lab::write_output(cfg.trace, lab::prof::chrome_trace(all, "demo_sweep_report"),
                      "the trace (" + std::to_string(all.size()) + " events)");
    std::cerr << "open it in https://ui.perfetto.dev or chrome://tracing\n";
  }
}

int run(const Settings& in) {
  Settings cfg = in;
  if (cfg.batch.empty()) cfg.batch = cfg.full ? kFullBatch : kDefaultBatch;
  if (cfg.seq.empty()) cfg.seq = cfg.full ? kFullSeq : kDefaultSeq;
  if (cfg.dim.empty()) cfg.dim = cfg.full ? kFullDim : kDefaultDim;
  const auto known = chapter_topics();
  std::vector<std::vector<const lab::Variant*>> variants;
  for (const auto& op : cfg.ops) {
    auto vs = lab::Registry::global().of_topic(op);
    if (vs.empty()) throw lab::UsageError("--ops " + op + ": no such operation in this chapter (known: " + join(known) + ")");
    for (const auto b : cfg.batch)
      for (const auto s : cfg.seq)
        for (const auto d : cfg.dim) {
          const lab::Shape shape = shape_for(*vs.front()->topic, b, s, d);
          if (const std::string why = vs.front()->topic->validate(shape); !why.empty())
            throw lab::UsageError(op + " at batch " + std::to_string(b) + ", seq " + std::to_string(s) + ", dim " +
                                  std::to_string(d) + " (shape " + shape.str() + "): " + why);
        }
    variants.push_back(std::move(vs));
  }

  lab::check_writable(cfg.json, "--json");  // before the sweep, not after it
  lab::check_writable(cfg.trace, "--trace");
  const lab::DeviceFacts dev = lab::init_device();
  const lab::Peaks peaks = lab::measured_peaks(dev);
  const double peak_gbps = peaks.copy_gbs;
  lab::L2Flusher flusher(dev.l2_bytes, dev.sms);
  SameAccess floors(cfg.reps, flusher);
  std::size_t total = 0;
  for (const auto& vs : variants) total += vs.size() * cfg.batch.size() * cfg.seq.size() * cfg.dim.size();
  std::cerr << dev.describe() << "\n"
            << "sweep: " << total << " measurements (" << join(cfg.ops) << "), median of " << cfg.reps
            << " runs each, L2 flushed before every run; efficiency against the "
            << (peaks.rejected.empty() ? "measured copy rate, " : "datasheet's bandwidth, ") << fixed(peak_gbps, 0)
            << " GB/s" << (peaks.rejected.empty() ? "" : " (the measured peaks were not used: " + peaks.rejected + ")")
            << "\n";

  std::vector<Record> records;
  std::size_t done = 0;
  for (std::size_t o = 0; o < cfg.ops.size(); ++o)
    for (const auto b : cfg.batch)
      for (const auto s : cfg.seq)
        for (const auto d : cfg.dim)
          for (const lab::Variant* v : variants[o]) {
            const lab::Shape shape = shape_for(*v->topic, b, s, d);
            Record r = measure(*v, shape, cfg, flusher);
            r.operation = cfg.ops[o];
            r.implementation = lab::role_name(v->role);
            r.program = v->program;
            r.final_optimized = v->role == lab::Role::optimized && v == last_optimized(variants[o]);
            r.batch = b, r.seq = s, r.dim = d;
            const lab::Work work = v->topic->work(shape);
            r.written_bytes = work.written_bytes();
            r.same_size_copy_gbps = floors.copy_gbps(work.bytes);
            r.floor_gbps = floors.gbps(work.bytes - r.written_bytes, r.written_bytes);
            std::fprintf(stderr, "[%zu/%zu] %s %s %lldx%lldx%lld: %s\n", ++done, total, r.operation.c_str(),
                         r.program.c_str(), (long long)b, (long long)s, (long long)d,
                         r.time_ms ? (fixed(*r.time_ms, 4) + " ms, " + fixed(*r.throughput_gbps, 0) + " GB/s" +
                                      (r.verified ? ", verified" : ""))
                                         .c_str()
                                   : r.status.c_str());
            records.push_back(std::move(r));
          }

  print_tables(records, cfg.ops, peak_gbps);
  if (!cfg.json.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : records) out.push_back(to_json(r, peak_gbps));
    lab::write_output(cfg.json, out.dump(2) + "\n", std::to_string(records.size()) + " records");
  }
  // After the records are written: a profiler that cannot start (CUPTI held by another) loses nothing.
  if (cfg.profile || !cfg.trace.empty()) profile_pass(records, variants, cfg);
  return lab::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Settings cfg;
  return lab::demo_main(
      argc, argv, {"demo_sweep_report", "sweep_report", kDescription, 3},
      [&](CLI::App& app) {
        app.add_option("--ops", cfg.ops, "operations (topics) to sweep, comma-separated (default: " + join(kDefaultOps, ",") +
                                             "; backward topics such as layernorm_backward work too)")
            ->delimiter(',');
        app.add_option("--batch", cfg.batch, "batch sizes, comma-separated (default 32; --full: 16,32,64,128)")
            ->delimiter(',')
            ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
        app.add_option("--seq", cfg.seq, "sequence lengths (default 512,2048; --full: 256,512,1024,2048)")
            ->delimiter(',')
            ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
        app.add_option("--dim", cfg.dim, "tensor dimensions (default 8,64,512,768,4096; --full: 8,16,...,512,768,4096)")
            ->delimiter(',')
            ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
        app.add_flag("--full", cfg.full, "the users' whole grid: 4 batch sizes x 4 sequence lengths x 9 dimensions");
        app.add_option("--reps", cfg.reps, "timed runs per measurement, the median reported (default 10)")
            ->check(CLI::Range(1, 100000));
        app.add_option("--verify-mb", cfg.verify_mb,
                       "check results against the double reference when the operation moves at most this many MB "
                       "(default 256; 0: never)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--seed", cfg.seed, "seed of the inputs (default 1)")->check(lab::cli::seed());
        app.add_option("--json", cfg.json, "write the records to this file (a JSON array)")
            ->check(lab::cli::output_file());
        app.add_flag("--profile", cfg.profile,
                     "after the sweep, each operation's implementations by kernel: every measurement run again "
                     "under CUPTI (3 warm-up runs, 5 profiled), a table per program sorted by GPU time");
        app.add_option("--trace", cfg.trace, "write that profiled pass as a Chrome trace (JSON) to this file")
            ->check(lab::cli::output_file());
      },
      [&] { return run(cfg); });
}
