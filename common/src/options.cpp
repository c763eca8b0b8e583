// The program's command line: its flags, --help and --describe (no GPU needed for any of them).
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness_internal.hpp"
#include "lab/check.hpp"
#include "lab/harness.hpp"

namespace lab {

namespace {

using detail::kDefaultMinTimeSeconds;
using detail::kDefaultRepetitions;
using detail::shapes_text;
using detail::starts_with;

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
    << (v.declared.checks.empty() ? std::string()
                                  : "and this variant's own (where a code path of its own starts): " +
                                        shapes_text(v.declared.checks) + "\n")
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
    CLI::Option* shape =
        app.add_option("--shape", shape_text, "time these shapes instead of the default sweep (repeatable, or comma-separated)")
            ->type_name(dims_text(*v.topic))
            ->delimiter(',');
    app.add_flag("--skip-check-set", o.skip_check_set,
                 "with --check-only and --shape: verify those shapes alone, not the awkward sizes always verified "
                 "too (one shape's failure again, quickly: the fuzz's reproduce line)")
        ->needs("--check-only")
        ->needs(shape);
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

std::string seed_problem(std::string_view text) {
  std::uint64_t v = 0;
  if (text.empty()) return "empty (a whole number from 0 to 18446744073709551615)";
  for (char c : text) {
    if (c < '0' || c > '9') return "not a whole number from 0 to 18446744073709551615";
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return "above 18446744073709551615";
    v = v * 10 + d;
  }
  return "";
}

std::uint64_t parse_seed(std::string_view text) {
  if (const std::string why = seed_problem(text); !why.empty())
    throw UsageError(text.empty() ? "--seed: " + why : "--seed " + std::string(text) + ": " + why);
  std::uint64_t v = 0;
  for (char c : text) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return v;
}

namespace {

// The value of a Google Benchmark flag given as --name=value (nullopt: not this flag).
std::optional<std::string> flag_value(const std::string& arg, std::string_view name) {
  if (!starts_with(arg, name) || arg.size() <= name.size() || arg[name.size()] != '=') return std::nullopt;
  return arg.substr(name.size() + 1);
}

// The Google Benchmark flags the lab checks itself, before the device is touched: what Google
// Benchmark would take badly (1.7.1 aborts on a negative repetition count, runs nothing on 0, and
// prints its usage and exits 0 on a format it does not write) and an output file that could not
// be written (Google Benchmark would then exit 1 after the whole run, which reads as a wrong result).
void check_benchmark_flag(const std::string& arg) {
  for (const char* name : {"--benchmark_format", "--benchmark_out_format"})
    if (const auto v = flag_value(arg, name); v && *v != "console" && *v != "json" && *v != "csv")
      throw UsageError(std::string(name) + "=" + *v + ": not a format Google Benchmark writes (console, json or csv)");
  if (const auto v = flag_value(arg, "--benchmark_repetitions")) {
    bool whole = !v->empty() && v->size() < 10;
    for (char c : *v) whole = whole && c >= '0' && c <= '9';
    if (!whole || std::stol(*v) < 1)
      throw UsageError("--benchmark_repetitions=" + *v + ": not a whole number of at least 1");
  }
  if (const auto v = flag_value(arg, "--benchmark_out")) check_output_file("--benchmark_out", *v);
}

}  // namespace

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
      check_benchmark_flag(a);
      o.benchmark_args.push_back(a);
      if (a == "--benchmark_format=json" || a == "--benchmark_format=csv") o.machine_readable = true;
    } else {
      throw UsageError("unknown argument '" + a + "' (see --help)");
    }
  }
  if (cli.app.count("--trace")) check_output_file("--trace", o.trace);
  o.cache = parse_cache_mode(cli.cache);
  if (cli.app.count("--seed")) o.seed = parse_seed(cli.seed);
  for (const auto& s : cli.shape_text) {
    Shape sh = parse_shape(s, v.topic->dims, "--shape", v.topic->switches);
    if (auto why = v.topic->validate(sh); !why.empty()) throw UsageError("--shape " + s + ": " + why);
    o.shapes.push_back(std::move(sh));
  }
  if (o.skip_check_set && shapes_to_verify(*v.topic, o.shapes, false).empty())
    throw UsageError("--skip-check-set: none of the --shape shapes can be verified (over the CPU reference's limits, " +
                     verify_limits_text("or") + " of work, or the topic's own), so nothing would be checked");
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

}  // namespace lab
