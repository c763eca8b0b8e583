// The timed run of a program: Google Benchmark's glue, the CUPTI profile pass, and the contract's
// main (flags checked, the device initialised, verification, timing, the exit status).
#include "lab/harness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <benchmark/benchmark.h>

#include "lab/check.hpp"
#include "lab/device.hpp"
#include "lab/memory.hpp"
#include "lab/profiler.hpp"

#include "harness_internal.hpp"

namespace lab {

using detail::kDefaultMinTimeSeconds;
using detail::kDefaultRepetitions;
using detail::kWarmupRuns;
using detail::shapes_text;
using detail::starts_with;

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
      if (c.v.declared.fp32_fma()) st.counters["%peak_fp32"] = 100.0 * tf / c.peaks.fp32_tflops;
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
  std::vector<std::pair<Shape, RunWindow>> windows;
  prof::Session session;
  for (const auto& s : shapes) {
    if (!unsupported(v, s).empty()) continue;
    windows.push_back({s, profiled_runs(v, s, seed, stream, kWarmupRuns, kProfiledRuns, s.str())});
  }
  const std::vector<prof::Record> records = session.stop();
  if (opt.profile) {
    for (const auto& [s, w] : windows) {
      std::vector<prof::Record> in;
      for (const auto& r : records)
        if (w.holds(r)) in.push_back(r);
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

  const DeviceFacts& dev = detail::this_device();
  out << v.program << ": " << role_name(v.role) << " variant of '" << t.name << "' (" << t.folder() << ")\n  "
      << v.description << "\n"
      << dev.describe() << "\n";

  std::size_t free_b = 0, total_b = 0;
  LAB_CHECK(cudaMemGetInfo(&free_b, &total_b));
  for (const auto& s : timed) {
    const double need = t.work(s).least_memory();
    if (need > static_cast<double>(total_b))
      throw OutOfMemory(static_cast<std::size_t>(need), free_b, total_b);
  }

  const Peaks peaks = measured_peaks(dev, opt.remeasure_peaks);
  if (!peaks.rejected.empty())
    out << "  measured peaks not used: " << peaks.rejected << "; not cached, and the %peak figures below are "
        << "against the datasheet's\n";
  else
    out << "  measured peaks" << (peaks.from_cache ? " (cached " + peaks.measured_at + ")" : " (measured now)")
        << ": copy " << static_cast<long>(peaks.copy_gbs) << " GB/s, FP32 " << peaks.fp32_tflops << " TFLOP/s"
        << (peaks.from_cache ? "; --remeasure-peaks to refresh" : "") << "\n";

  const std::uint64_t seed = opt.seed.value_or(fresh_seed());
  out << "  seed " << seed << " (reproduce with --seed " << seed << ")\n";
  out.flush();

  Stream stream;
  std::string verification = "skipped (--no-check)";
  if (!opt.no_check) {
    const auto shapes = shapes_to_verify(v, timed, !opt.skip_check_set);
    out << "verification (" << shapes.size() << (shapes.size() == 1 ? " shape" : " shapes")
        << " against a double-precision CPU reference):\n";
    int failed = 0, checked = 0;
    for (const auto& s : shapes) {
      if (const std::string why = unsupported(v, s); !why.empty()) {
        out << "  " << s.str() << ": N/A (" << why << ")\n";
        continue;
      }
      const Verdict r = check_variant(v, s, seed, stream);
      out << "  " << s.str() << ": " << (r.pass ? r.summary() : r.details()) << "\n";
      out.flush();
      ++checked;
      if (!r.pass) ++failed;
    }
    for (const auto& s : timed)
      if (std::find(shapes.begin(), shapes.end(), s) == shapes.end())
        out << "  " << s.str()
            << ": not verified (over the CPU reference's limits: " << verify_limits_text("or")
            << " of work, or the topic's own); the "
               "shapes above cover the same code\n";
    if (failed) {
      std::cerr << "error: verification FAILED on " << failed << " of " << checked << " shapes checked (seed " << seed
                << "); not timing a wrong result\n";
      return kExitWrongResult;
    }
    if (checked == 0) {
      // Every shape N/A for this variant here: no PASS, since nothing was checked.
      out << "verification: nothing checked (every shape N/A above)\n";
      if (opt.skip_check_set) {
        std::cerr << "error: --skip-check-set: " << v.program
                  << " does not run any of the --shape shapes (N/A above), so nothing was verified\n";
        return kExitUsage;
      }
      verification = "none (every shape N/A)";
    } else {
      verification = "PASS (" + std::to_string(checked) + (checked == 1 ? " shape)" : " shapes)");
      out << "verification PASS\n";
    }
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

std::optional<std::vector<const Variant*>> registered_variants() {
  std::optional<std::vector<const Variant*>> all;
  run_reporting_errors([&] {
    all = Registry::global().variants();  // throws what registration refused
    return int{kExitOk};
  });
  return all;
}

int run_main(int argc, char** argv) {
  const auto all = registered_variants();
  if (!all) return kExitUsage;
  if (all->size() != 1) {
    std::cerr << "error: a lab program holds exactly one variant; this one has " << all->size() << "\n";
    return kExitUsage;
  }
  return run_main(*all->front(), argc, argv);
}

}  // namespace lab
