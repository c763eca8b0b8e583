#include "lab/harness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "lab/check.hpp"
#include "lab/device.hpp"
#include "lab/memory.hpp"
#include "lab/profiler.hpp"
#include "lab/stats.hpp"

namespace lab {

namespace {

constexpr int kDefaultRepetitions = 5;
constexpr double kDefaultMinTimeSeconds = 0.05;  // of GPU time per repetition
constexpr int kWarmupRuns = 3;

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

std::string shapes_text(const std::vector<Shape>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ' ';
    s += x.str();
  }
  return s;
}

std::string dims_text(const TopicInfo& t) {
  std::string s;
  for (const auto& d : t.dims) {
    if (!s.empty()) s += 'x';
    s += d;
  }
  return s;
}

std::string footer(const Variant& v) {
  const TopicInfo& t = *v.topic;
  std::ostringstream o;
  o << "Shapes are " << dims_text(t);
  for (const auto& sw : t.switches) o << " (" << sw << ": 0 off, 1 on)";
  o << ". Default sweep: " << shapes_text(t.sweep) << "\n"
    << "Always verified (awkward sizes): " << shapes_text(t.checks) << "\n"
    << "Timed shapes are verified too while the CPU reference stays under " << verify_limits_text()
    << " of work.\n\n"
    << "Timing runs through Google Benchmark; its flags pass through, for example\n"
    << "  --benchmark_repetitions=N    samples per shape (default " << kDefaultRepetitions << "; the median is the headline)\n"
    << "  --benchmark_min_time=S       GPU seconds per sample (default " << kDefaultMinTimeSeconds << ")\n"
    << "  --benchmark_filter=REGEX     run matching shapes only\n"
    << "  --benchmark_format=console|json|csv   (json/csv: the lab's own lines go to stderr)\n"
    << "  --benchmark_out=FILE --benchmark_out_format=json\n"
    << "  --benchmark_list_tests\n\n"
    << exit_status_help();
  return o.str();
}

struct Cli {
  CLI::App app;
  std::vector<std::string> shape_text;
  std::string cache = "cold";
  std::string seed;
  Options o;

  explicit Cli(const Variant& v) : app(v.description, v.program) {
    app.allow_extras();
    app.description(v.program + ": " + std::string(role_name(v.role)) + " variant of '" + v.topic->name +
                    "' (" + v.topic->folder() + ")\n" + v.description);
    app.add_flag("--check-only", o.check_only, "verify, print the verdict, skip timing");
    app.add_flag("--no-check", o.no_check, "skip verification (timing only)")->excludes("--check-only");
    app.add_option("--shape", shape_text, "time these shapes instead of the default sweep (repeatable, or comma-separated)")
        ->type_name(dims_text(*v.topic))
        ->delimiter(',');
    app.add_option("--cache", cache, "cold: flush the L2 before every timed iteration (default); hot: back to back")
        ->check(CLI::IsMember({"cold", "hot"}));
    app.add_option("--seed", seed, "seed for the random inputs (default: a fresh one, printed)");
    app.add_flag("--remeasure-peaks", o.remeasure_peaks, "measure the device's peak bandwidth and FP32 rate again");
    app.add_flag("--profile", o.profile,
                 "after the timing, profile a pass of its own (CUPTI): per-kernel, copy and memset table by total GPU time");
    app.add_option("--trace", o.trace, "with that pass, write a Chrome trace (Perfetto, chrome://tracing) to FILE")
        ->type_name("FILE.json");
    app.add_flag("--describe", o.describe, "print this variant's description as JSON and exit (no GPU needed)");
    app.footer(footer(v));
  }
};

}  // namespace

std::uint64_t parse_seed(std::string_view text) {
  std::uint64_t v = 0;
  if (text.empty()) throw UsageError("--seed: empty (a whole number from 0 to 18446744073709551615)");
  for (char c : text) {
    if (c < '0' || c > '9')
      throw UsageError("--seed " + std::string(text) + ": not a whole number from 0 to 18446744073709551615");
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) throw UsageError("--seed " + std::string(text) + ": above 18446744073709551615");
    v = v * 10 + d;
  }
  return v;
}

std::string help_text(const Variant& v) {
  Cli cli(v);
  return cli.app.help();
}

Options parse_options(const Variant& v, const std::vector<std::string>& args) {
  Cli cli(v);
  std::vector<const char*> argv{v.program.c_str()};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    cli.app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    Options o;
    o.help = true;
    return o;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  Options o = cli.o;
  for (const auto& a : cli.app.remaining()) {
    if (starts_with(a, "--benchmark_") || starts_with(a, "--v=")) {
      o.benchmark_args.push_back(a);
      if (a == "--benchmark_format=json" || a == "--benchmark_format=csv") o.machine_readable = true;
    } else {
      throw UsageError("unknown argument '" + a + "' (see --help)");
    }
  }
  o.cache = parse_cache_mode(cli.cache);
  if (cli.app.count("--seed")) o.seed = parse_seed(cli.seed);
  for (const auto& s : cli.shape_text) {
    Shape sh = parse_shape(s, v.topic->dims, "--shape", v.topic->switches);
    if (auto why = v.topic->validate(sh); !why.empty()) throw UsageError("--shape " + s + ": " + why);
    o.shapes.push_back(std::move(sh));
  }
  return o;
}

std::string describe_json(const Variant& v) {
  const TopicInfo& t = *v.topic;
  auto shapes = [&](const std::vector<Shape>& list) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& s : list) {
      const Work w = t.work(s);
      a.push_back({{"shape", s.str()}, {"bytes", w.bytes}, {"flops", w.flops}});
    }
    return a;
  };
  const nlohmann::json j = {{"program", v.program},       {"topic", t.name},
                            {"chapter", t.chapter},       {"folder", t.folder()},
                            {"role", role_name(v.role)},  {"step", v.step},
                            {"description", v.description}, {"dims", t.dims},
                            {"sweep", shapes(t.sweep)},   {"checks", shapes(t.checks)},
                            {"built_for", built_architectures()}};
  nlohmann::json declared = {{"precision", v.declared.precision}, {"writes", v.declared.writes},
                             {"moves_more_than_minimum", static_cast<bool>(v.declared.moved_bytes)}};
  if (v.declared.tolerance) declared["tolerance"] = v.declared.tolerance->name;
  nlohmann::json out = j;
  out["declared"] = std::move(declared);
  return out.dump(2);
}

std::vector<Shape> shapes_to_verify(const TopicInfo& t, const std::vector<Shape>& timed) {
  std::vector<Shape> out = t.checks;
  for (const auto& s : timed)
    if (t.work(s).bytes <= kVerifyBytesLimit && t.work(s).flops <= kVerifyFlopsLimit && t.verifiable(s) &&
        std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  return out;
}

namespace {

// Poisons the outputs, runs the variant once and compares with the reference.
Verdict run_and_verify(Instance& instance, Problem& p, cudaStream_t stream) {
  p.poison(stream);
  instance.run(p, stream);
  LAB_CHECK_LAUNCH();
  LAB_CHECK(cudaStreamSynchronize(stream));
  return p.verify();
}

const DeviceFacts& this_device() {
  static const DeviceFacts facts = init_device();
  return facts;
}

}  // namespace

Prepared prepare(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream) {
  Prepared out;
  Rng rng(seed);
  out.problem = v.topic->make(s, rng, v.declared);
  LAB_CHECK(cudaDeviceSynchronize());  // inputs are complete before the variant's stream starts
  out.instance = v.prepare(*out.problem, stream);
  LAB_CHECK_LAUNCH();
  LAB_CHECK(cudaStreamSynchronize(stream));
  return out;
}

std::string unsupported(const Variant& v, const Shape& s) { return v.supports(s, this_device()); }

Verdict check_variant(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream) {
  prof::Range phase("verify " + s.str());
  if (const std::string why = unsupported(v, s); !why.empty())
    throw Error(v.program + " does not support " + s.str() + ": " + why + " (ask unsupported() first)");
  Prepared pr = prepare(v, s, seed, stream);
  return run_and_verify(*pr.instance, *pr.problem, stream);
}

Measurement measure_variant(const Variant& v, const Shape& s, std::uint64_t seed, int reps, L2Flusher& flusher,
                            bool verify) {
  Measurement m;
  const std::size_t before = device_memory_stats().current;
  reset_device_memory_peak();
  if (m.not_applicable = unsupported(v, s); !m.not_applicable.empty()) return m;
  try {
    Stream stream;
    Prepared pr = prepare(v, s, seed, stream);
    if (verify) {
      const Verdict verdict = run_and_verify(*pr.instance, *pr.problem, stream);
      if (!verdict.pass) throw Error(v.program + " at " + s.str() + ": wrong result: " + verdict.details());
      m.verified = true;
    }
    const auto ms = flushed_samples_ms([&] { pr.instance->run(*pr.problem, stream); }, stream, &flusher, reps);
    m.ms = stats::median(ms);
    m.peak_mib = double(device_memory_stats().peak - before) / double(1 << 20);
  } catch (const OutOfMemory&) {
    m.oom = true;
  }
  return m;
}

namespace {

struct BenchContext {
  const Variant& v;
  const Options& opt;
  Peaks peaks;
  std::uint64_t seed = 0;
  Stream stream;
  Event start, stop;
  std::unique_ptr<L2Flusher> flusher;
  Shape shape;        // of the problem and the variant's state held below
  Prepared prepared;
  int exit_code = kExitOk;
  std::vector<std::string> failures;
  std::vector<std::pair<Shape, std::string>> failed_shapes;  // not retried in later repetitions

  BenchContext(const Variant& var, const Options& o) : v(var), opt(o) {}

  // The problem and the variant's state for the shape (its prepare step: untimed, but its memory
  // counts in peak_MiB).
  Prepared& prepared_for(const Shape& s) {
    if (!prepared.problem || !(shape == s)) {
      prepared = {};  // free the previous shape before allocating the next
      reset_device_memory_peak();
      prepared = prepare(v, s, seed, stream);
      shape = s;
    }
    return prepared;
  }

  const std::string* failure_of(const Shape& s) const {
    for (const auto& [shape, msg] : failed_shapes)
      if (shape == s) return &msg;
    return nullptr;
  }

  void fail(const Shape& s, const Error& e) {
    prepared = {};
    failed_shapes.emplace_back(s, e.what());
    exit_code = std::max<int>(exit_code, e.exit_code() == kExitOutOfMemory ? kExitOutOfMemory : kExitWrongResult);
    failures.push_back(s.str() + ": " + e.what());
  }
};

void bench_shape(benchmark::State& st, BenchContext& c, const Shape& s) {
  if (const std::string* msg = c.failure_of(s)) {
    st.SkipWithError(msg->c_str());
    return;
  }
  if (const std::string why = unsupported(c.v, s); !why.empty()) {
    st.SkipWithError((std::string(kNotApplicableMarker) + why).c_str());
    return;
  }
  try {
    Prepared& pr = [&]() -> Prepared& {
      prof::Range phase("setup " + s.str());
      return c.prepared_for(s);
    }();
    Problem& p = *pr.problem;
    Instance& instance = *pr.instance;
    {
      prof::Range phase("warm-up " + s.str());
      for (int i = 0; i < kWarmupRuns; ++i) {  // module load, first-launch and library setup costs
        instance.run(p, c.stream);
        LAB_CHECK_LAUNCH();
      }
      c.stream.sync();
    }
    prof::Range phase("timed " + s.str());
    double total_ms = 0, host_ms = 0;
    std::int64_t n = 0;
    for (auto _ : st) {
      if (c.opt.cache == CacheMode::cold) c.flusher->flush(c.stream);
      const float ms = time_once_ms(
          [&] {
            // The host's own time in the timed region: issuing the work (and any wait the variant
            // makes itself). Near the GPU time, the GPU waited on the host: a host-bound region.
            const auto h0 = std::chrono::steady_clock::now();
            instance.run(p, c.stream);
            host_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - h0).count();
          },
          c.stream, c.start, c.stop);
      st.SetIterationTime(ms * 1e-3);
      total_ms += ms;
      ++n;
    }
    if (n == 0 || total_ms <= 0) return;
    const Work w = c.v.topic->work(s);
    const double secs = total_ms * 1e-3 / static_cast<double>(n);  // per iteration
    const double gbs = w.bytes / secs / 1e9;
    st.counters["GB/s"] = gbs;
    st.counters["%peak_bw"] = 100.0 * gbs / c.peaks.copy_gbs;
    if (w.flops > 0) {
      const double tf = w.flops / secs / 1e12;
      st.counters["TFLOP/s"] = tf;
      st.counters["%peak_fp32"] = 100.0 * tf / c.peaks.fp32_tflops;
    }
    st.counters["peak_MiB"] = static_cast<double>(device_memory_stats().peak) / (1024.0 * 1024.0);
    st.counters[kHostShareCounter] = host_ms / total_ms;
    for (const auto& [name, value] : p.counters(secs, c.stream)) st.counters[name] = value;
    if (c.v.declared.moved_bytes) {
      const double moved = c.v.declared.moved_bytes(s);
      st.counters["moved_GB/s"] = moved / secs / 1e9;
      st.counters["bytes_x_minimum"] = moved / w.bytes;
    }
    for (const auto& [name, value] : instance.counters(p, secs)) st.counters[name] = value;
  } catch (const Error& e) {
    c.fail(s, e);
    st.SkipWithError(e.what());
  }
}

std::vector<char*> to_argv(std::vector<std::string>& args) {
  std::vector<char*> a;
  for (auto& s : args) a.push_back(s.data());
  a.push_back(nullptr);
  return a;
}

bool has_flag(const std::vector<std::string>& args, std::string_view name) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) { return starts_with(a, name); });
}

constexpr int kProfiledRuns = 5;

// --profile / --trace: a pass of its own after the timing, under CUPTI. Per shape: the problem is
// made, warmed up and run kProfiledRuns times back to back (no L2 flush); the table covers those runs.
void profile_pass(const Variant& v, const Options& opt, const std::vector<Shape>& shapes, std::uint64_t seed,
                  std::ostream& out) {
  Stream stream;
  std::vector<std::pair<Shape, std::pair<std::uint64_t, std::uint64_t>>> windows;
  prof::Session session;
  for (const auto& s : shapes) {
    if (!unsupported(v, s).empty()) continue;
    Prepared pr;
    {
      prof::Range phase("setup " + s.str());
      pr = prepare(v, s, seed, stream);
    }
    Problem* p = pr.problem.get();
    Instance& instance = *pr.instance;
    {
      prof::Range phase("warm-up " + s.str());
      for (int i = 0; i < kWarmupRuns; ++i) instance.run(*p, stream);
      LAB_CHECK_LAUNCH();
      stream.sync();
    }
    const std::uint64_t t0 = prof::now_ns();
    {
      prof::Range phase("profiled " + s.str());
      for (int i = 0; i < kProfiledRuns; ++i) instance.run(*p, stream);
      LAB_CHECK_LAUNCH();
      stream.sync();
    }
    windows.push_back({s, {t0, prof::now_ns()}});
  }
  const std::vector<prof::Record> records = session.stop();
  if (opt.profile) {
    for (const auto& [s, w] : windows) {
      std::vector<prof::Record> in;
      for (const auto& r : records)
        if (r.start_ns >= w.first && r.start_ns <= w.second) in.push_back(r);
      out << "\nprofile " << s.str() << ": " << kProfiledRuns << " runs back to back after " << kWarmupRuns
          << " warm-up runs (L2 not flushed), GPU times from CUPTI, sorted by total:\n"
          << prof::format_table(prof::key_averages(in));
    }
  }
  if (!opt.trace.empty()) {
    std::ofstream f(opt.trace);
    f << prof::chrome_trace(records, v.program);
    if (!f) throw Error("cannot write the trace to " + opt.trace);
    out << "\ntrace: " << opt.trace << " (" << records.size()
        << " events: kernels and copies per stream, runtime calls per thread, the phases; open it in "
           "https://ui.perfetto.dev or chrome://tracing)\n";
  }
  out.flush();
}

int run(const Variant& v, const Options& opt, const std::string& argv0) {
  std::ostream& out = opt.machine_readable ? std::cerr : std::cout;
  const TopicInfo& t = *v.topic;
  const std::vector<Shape> timed = opt.shapes.empty() ? t.sweep : opt.shapes;

  if (!opt.trace.empty() && !std::ofstream(opt.trace))
    throw UsageError("--trace " + opt.trace + ": cannot create the file");
  // Google Benchmark's flags are parsed here, before the device is touched: a bad value is exit 2
  // on any machine (Google Benchmark names the flag and the value it could not read).
  std::vector<std::string> bargs{argv0};
  bargs.insert(bargs.end(), opt.benchmark_args.begin(), opt.benchmark_args.end());
  if (!has_flag(bargs, "--benchmark_repetitions"))
    bargs.push_back("--benchmark_repetitions=" + std::to_string(kDefaultRepetitions));
  if (!opt.machine_readable && !has_flag(bargs, "--benchmark_display_aggregates_only") &&
      !has_flag(bargs, "--benchmark_report_aggregates_only"))
    bargs.push_back("--benchmark_display_aggregates_only=true");
  // A bare number of seconds: understood by Google Benchmark 1.7 and 1.8 alike.
  if (!has_flag(bargs, "--benchmark_min_time"))
    bargs.push_back("--benchmark_min_time=" + std::to_string(kDefaultMinTimeSeconds));
  auto bargv = to_argv(bargs);
  int bargc = static_cast<int>(bargs.size());
  benchmark::Initialize(&bargc, bargv.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, bargv.data())) return kExitUsage;

  const DeviceFacts& dev = this_device();
  out << v.program << ": " << role_name(v.role) << " variant of '" << t.name << "' (" << t.folder() << ")\n  "
      << v.description << "\n"
      << dev.describe() << "\n";

  std::size_t free_b = 0, total_b = 0;
  LAB_CHECK(cudaMemGetInfo(&free_b, &total_b));
  for (const auto& s : timed) {
    const double need = t.work(s).bytes;
    if (need > static_cast<double>(total_b))
      throw OutOfMemory(static_cast<std::size_t>(need), free_b, total_b);
  }

  const Peaks peaks = measured_peaks(dev, opt.remeasure_peaks);
  out << "  measured peaks" << (peaks.from_cache ? " (cached " + peaks.measured_at + ")" : " (measured now)") << ": copy "
      << static_cast<long>(peaks.copy_gbs) << " GB/s, FP32 " << peaks.fp32_tflops << " TFLOP/s"
      << (peaks.from_cache ? "; --remeasure-peaks to refresh" : "") << "\n";

  const std::uint64_t seed = opt.seed.value_or(fresh_seed());
  out << "  seed " << seed << " (reproduce with --seed " << seed << ")\n";
  out.flush();

  Stream stream;
  std::string verification = "skipped (--no-check)";
  if (!opt.no_check) {
    const auto shapes = shapes_to_verify(t, timed);
    out << "verification (" << shapes.size() << " shapes against a double-precision CPU reference):\n";
    int failed = 0;
    for (const auto& s : shapes) {
      if (const std::string why = unsupported(v, s); !why.empty()) {
        out << "  " << s.str() << ": N/A (" << why << ")\n";
        continue;
      }
      const Verdict r = check_variant(v, s, seed, stream);
      out << "  " << s.str() << ": " << (r.pass ? r.summary() : r.details()) << "\n";
      out.flush();
      if (!r.pass) ++failed;
    }
    for (const auto& s : timed)
      if (std::find(shapes.begin(), shapes.end(), s) == shapes.end())
        out << "  " << s.str()
            << ": not verified (over the CPU reference's limits: " << verify_limits_text("or")
            << " of work, or the topic's own); the "
               "shapes above cover the same code\n";
    if (failed) {
      std::cerr << "error: verification FAILED on " << failed << " of " << shapes.size() << " shapes (seed " << seed
                << "); not timing a wrong result\n";
      return kExitWrongResult;
    }
    verification = "PASS (" + std::to_string(shapes.size()) + " shapes)";
    out << "verification PASS\n";
  }
  if (opt.check_only) return kExitOk;

  // Timing.
  BenchContext ctx(v, opt);
  ctx.peaks = peaks;
  ctx.seed = seed;
  if (opt.cache == CacheMode::cold) ctx.flusher = std::make_unique<L2Flusher>(dev.l2_bytes, dev.sms);

  out << "timing: cache " << cache_mode_name(opt.cache)
      << (opt.cache == CacheMode::cold ? " (L2 flushed by reading " + std::to_string(ctx.flusher->bytes() >> 20) +
                                             " MiB before every iteration, outside the timed region)"
                                       : " (iterations back to back)")
      << "; CUDA events on the variant's stream; " << kWarmupRuns
      << " warm-up runs; time and counters are per iteration, GPU time\n";
  out.flush();

  benchmark::AddCustomContext(context::kProgram, v.program);
  benchmark::AddCustomContext(context::kTopic, t.name);
  benchmark::AddCustomContext(context::kRole, role_name(v.role));
  benchmark::AddCustomContext(context::kDevice, dev.name);
  benchmark::AddCustomContext(context::kDeviceUuid, dev.uuid);
  benchmark::AddCustomContext(context::kArch, dev.arch());
  benchmark::AddCustomContext(context::kDriver, cuda_version_text(dev.driver_version));
  benchmark::AddCustomContext(context::kRuntime, cuda_version_text(dev.runtime_version));
  benchmark::AddCustomContext(context::kSmClockMhz, std::to_string(dev.sm_clock_khz / 1000));
  benchmark::AddCustomContext(context::kMemClockMhz, std::to_string(dev.mem_clock_khz / 1000));
  benchmark::AddCustomContext(context::kPeakCopyGbs, std::to_string(peaks.copy_gbs));
  benchmark::AddCustomContext(context::kPeakFp32Tflops, std::to_string(peaks.fp32_tflops));
  benchmark::AddCustomContext(context::kCache, cache_mode_name(opt.cache));
  benchmark::AddCustomContext(context::kSeed, std::to_string(seed));
  benchmark::AddCustomContext(context::kVerification, verification);

  for (const auto& s : timed) {
    const Work w = t.work(s);
    const double est_s = std::max(w.bytes / (peaks.copy_gbs * 1e9), w.flops / (peaks.fp32_tflops * 1e12));
    auto* b = benchmark::RegisterBenchmark((t.name + "/" + v.program + "/" + s.str()).c_str(),
                                           [&ctx, s](benchmark::State& st) { bench_shape(st, ctx, s); });
    b->UseManualTime()->Unit(est_s > 5e-3 ? benchmark::kMillisecond : benchmark::kMicrosecond);
  }
  const std::size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ctx.prepared = {};
  const bool listing = has_flag(bargs, "--benchmark_list_tests");
  if (ran == 0 && !listing) {
    std::cerr << "error: --benchmark_filter matched none of: " << shapes_text(timed) << "\n";
    return kExitUsage;
  }
  for (const auto& f : ctx.failures) std::cerr << "error: " << f << "\n";
  if ((opt.profile || !opt.trace.empty()) && ctx.exit_code == kExitOk && !listing)
    profile_pass(v, opt, timed, seed, out);
  return ctx.exit_code;
}

}  // namespace

int run_main(const Variant& v, int argc, char** argv) {
  return run_reporting_errors([&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const Options opt = parse_options(v, args);
    if (opt.help) {
      std::cout << help_text(v);
      return int{kExitOk};
    }
    if (opt.describe) {
      std::cout << describe_json(v) << "\n";
      return int{kExitOk};
    }
    return run(v, opt, argv[0]);
  });
}

int run_main(int argc, char** argv) {
  const auto all = Registry::global().variants();
  if (all.size() != 1) {
    std::cerr << "error: a lab program holds exactly one variant; this one has " << all.size() << "\n";
    return kExitUsage;
  }
  return run_main(*all.front(), argc, argv);
}

}  // namespace lab
