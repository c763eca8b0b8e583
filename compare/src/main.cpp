// compare: runs the lab's baseline/optimized pairs and reports speedups with statistics.
//   compare --list
//   compare --chapter 1 [--quick] [--json r.json --csv r.csv --markdown r.md]
// Exit status: 0 all good; 1 a failure row (WRONG, CRASH, TIMEOUT, OOM, NOT-BUILT, BAD-OUTPUT,
// USAGE) or a regression against --against; 2 bad usage, or none of the programs selected
// built; 3 no usable CUDA device.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "compare.hpp"
#include "lab/cli.hpp"
#include "lab/rng.hpp"
#include "report.hpp"

#ifndef LAB_DEFAULT_MANIFEST
#define LAB_DEFAULT_MANIFEST "manifest.json"
#endif

namespace {

std::string default_manifest() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = 0;
    // The build tree (build/compare/compare -> build/manifest.json), then an install
    // (PREFIX/bin/compare -> PREFIX/share/cuda-perf-lab/manifest.json).
    const auto up = std::filesystem::path(buf).parent_path().parent_path();
    for (const auto& candidate : {up / "manifest.json", up / "share" / "cuda-perf-lab" / "manifest.json"})
      if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return LAB_DEFAULT_MANIFEST;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) {
    std::cerr << "compare: error: cannot write " << path << "\n";
    return false;
  }
  out << text;
  return static_cast<bool>(out);
}

void list(const compare::Manifest& m) {
  std::map<std::string, std::map<std::string, std::vector<const compare::Program*>>> tree;
  for (const auto& p : m.programs) tree[p.folder][p.topic.empty() ? "(unknown topic)" : p.topic].push_back(&p);
  for (const auto& [folder, topics] : tree) {
    std::cout << folder << "\n";
    for (const auto& [topic, progs] : topics) {
      std::cout << "  " << topic << "\n";
      for (const auto* p : progs) {
        std::cout << "    " << p->name << "  [" << (p->role.empty() ? "?" : p->role) << "]  ";
        if (p->built)
          std::cout << p->description << "\n";
        else
          std::cout << "(" << p->describe_error << ")\n";
      }
    }
  }
}

// --against: this run (or a replayed one) against a saved run: regressions and the agreement rule.
// Returns 0, 1 (a regression or a disagreement) or 2 (the two runs cannot be compared).
int judge_against(const std::string& against_text, const compare::Collected& c, const compare::Analysis& a,
                  bool ignore_device, bool color) {
  int status = 0;
  std::string error;
  const auto changes = compare::against(against_text, c, ignore_device, error);
  if (!error.empty()) {
    std::cerr << "compare: error: --against: " << error << "\n";
    return 2;
  }
  compare::print_changes(std::cout, changes, color);
  for (const auto& ch : changes)
    if (ch.verdict == "REGRESSED") status = 1;
  try {
    const compare::Agreement g = compare::row_agreement(against_text, a);
    compare::print_agreement(std::cout, g);
    if (!g.agrees()) {
      std::cerr << "compare: the two runs disagree on " << g.gpu_failed + g.host_failed
                << " rows (see 'agreement with the previous run')\n";
      status = 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "compare: error: --against: " << e.what() << "\n";
    return 2;
  }
  return status;
}

// Reads and checks a saved run before anything runs: "" and a message in `error` when it is bad.
std::string read_previous_run(const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read --against " + path;
    return "";
  }
  std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  try {
    compare::validate_previous_run(text);
  } catch (const std::exception& e) {
    error = "--against " + path + ": " + e.what();
    return "";
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "compare: run the lab's baseline and optimized programs, interleaved, and report each speedup with its median,\n"
      "a bootstrap 95% confidence interval, a Mann-Whitney U p-value and a verdict (FASTER, SLOWER, SAME, NOISY).",
      "compare"};
  std::string manifest_path = default_manifest();
  bool do_list = false, all = false, quick = false, ignore_device = false, no_color = false;
  std::string chapter, topic, json_path, csv_path, md_path, against_path;
  std::vector<std::string> replay_paths;
  compare::RunOptions o;
  std::uint64_t seed = 0;
  app.add_option("--manifest", manifest_path, "the build's manifest.json")->capture_default_str();
  auto* list_opt = app.add_flag("--list", do_list,
                                "list chapters, topics and variants with their descriptions (with --chapter N "
                                "--markdown FILE: the chapter README's table of programs)");
  auto* ch_opt = app.add_option("--chapter", chapter, "a chapter: number (1) or folder (ch01_basics)");
  auto* topic_opt = app.add_option("--topic", topic, "one topic, e.g. coalescing");
  std::string subfolder;
  auto* subfolder_opt = app.add_option("--subfolder", subfolder,
                                       "with --list --chapter: only the programs in this subfolder of the chapter "
                                       "(ch04's attention, gpt2, compiler)");
  auto* all_opt = app.add_flag("--all", all, "every chapter");
  all_opt->excludes(ch_opt)->excludes(topic_opt);
  list_opt->excludes(topic_opt)->excludes(all_opt);
  subfolder_opt->needs(list_opt)->needs(ch_opt);
  app.add_option("--repetitions", o.repetitions, "Google Benchmark repetitions per program run (default 3)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--rounds", o.rounds, "interleaved rounds (ABAB), one process per program each; samples per side = repetitions x rounds (default 4)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--quick", quick, "smoke run: each topic's smallest shape, 5 repetitions, 1 round, short samples");
  app.add_option("--shape", o.shapes, "shapes passed to the programs instead of their sweeps (repeatable)");
  app.add_option("--timeout", o.timeout_s, "seconds allowed to each program run (default 600)")
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            return !v.empty() && *end == '\0' && x > 0 && x <= 1e6 ? std::string()
                                                                   : std::string("a number of seconds above 0 (at most 1e6)");
          },
          "SECONDS"));
  app.add_option("--cache", o.cache, "cold (default) or hot, passed to the programs")->check(CLI::IsMember({"cold", "hot"}));
  app.add_option("--seed", seed, "input seed passed to every program (default: a fresh one, printed)")
      ->check(lab::cli::seed());
  // Output files are checked as the command line is read (never created or truncated by the check):
  // a typo costs nothing, not the whole run's results.
  app.add_option("--json", json_path, "write the results, raw samples included, as JSON")->check(lab::cli::output_file());
  app.add_option("--csv", csv_path, "write the rows as CSV")->check(lab::cli::output_file());
  app.add_option("--markdown", md_path, "write the rows as a Markdown table (for the chapter READMEs)")
      ->check(lab::cli::output_file());
  app.add_option("--against", against_path, "compare this run with a saved --json run (regressions)");
  app.add_flag("--ignore-device", ignore_device, "with --against: accept a run from another device");
  app.add_flag("--no-color", no_color, "no color in the terminal table");
  auto* replay_opt = app.add_option("--replay", replay_paths,
                                    "render a saved --json run again (table, --markdown, --csv) without running "
                                    "anything; with --against, judge it against another saved run. Repeatable: "
                                    "several runs of one device (the same repetitions, rounds and cache) as one "
                                    "table, each program at each shape from the one run that measured it");
  replay_opt->excludes(ch_opt)->excludes(topic_opt)->excludes(all_opt)->excludes(list_opt);
  app.footer(
      "--json, --csv and --markdown are written at the end; after each round but the last, the rounds so far go to\n"
      "FILE.unfinished beside them (the Markdown's first line says UNFINISHED, k of N rounds; the JSON has\n"
      "options.rounds_planned), which the end removes: a run cut short keeps its rounds and leaves FILE as it was.\n"
      "Exit status: 0 all good; 1 a failure row or a regression; 2 bad usage, or none of the programs selected built; 3 no usable CUDA device.\n"
      "Example: compare --chapter 1 --markdown ch01.md && tools/update_readme_results.py ch01_basics/README.md ch01.md");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "compare: error: " << e.what() << " (see --help)\n";
    return 2;
  }
  const bool color = !no_color && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
  if (!replay_paths.empty()) {
    std::string against_text;
    if (!against_path.empty()) {  // two saved runs judged against each other, nothing run
      std::string error;
      against_text = read_previous_run(against_path, error);
      if (!error.empty()) {
        std::cerr << "compare: error: " << error << "\n";
        return 2;
      }
    }
    compare::Replayed r;
    std::vector<nlohmann::json> runs;
    for (const std::string& path : replay_paths) {
      try {
        std::ifstream in(path);
        if (!in) throw std::runtime_error("cannot read it");
        const std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
        runs.push_back(compare::parse_run_file(text));
      } catch (const std::exception& e) {
        std::cerr << "compare: error: --replay " << path << ": " << e.what() << "\n";
        return 2;
      }
    }
    try {
      compare::merge_replays(runs, replay_paths, r);
    } catch (const std::exception& e) {
      std::cerr << "compare: error: --replay: " << e.what() << "\n";
      return 2;
    }
    // Steps paired as the build's files say where the run file predates "after" (a build need not
    // be there: a replay runs nothing, and without a manifest the run file's pairing stands).
    if (std::filesystem::exists(manifest_path)) {
      try {
        compare::steps_after_from(compare::load_manifest(manifest_path), r);
      } catch (const std::exception& e) {
        std::cerr << "compare: warning: --replay: the steps are paired as the run file says: " << e.what() << "\n";
      }
    }
    const compare::Analysis a = compare::analyse(r.collected, r.meta.seed);
    compare::print_table(std::cout, a, r.meta, color);
    int status = a.any_failure ? 1 : 0;
    if (!against_text.empty())
      status = std::max(status, judge_against(against_text, r.collected, a, ignore_device, color));
    bool wrote = true;
    if (!json_path.empty()) wrote &= write_file(json_path, compare::to_json(r.collected, a, r.meta).dump(2) + "\n");
    if (!csv_path.empty()) wrote &= write_file(csv_path, compare::csv(a, r.meta));
    if (!md_path.empty()) wrote &= write_file(md_path, compare::markdown(a, r.meta, &r.collected));
    return !wrote ? 2 : status;
  }
  if (!do_list && !all && chapter.empty() && topic.empty()) {
    std::cerr << "compare: error: say what to run: --chapter N, --topic NAME, --all, --list or --replay FILE (see --help)\n";
    return 2;
  }
  if (quick) {
    if (app.count("--repetitions") == 0) o.repetitions = 5;
    if (app.count("--rounds") == 0) o.rounds = 1;
    o.quick = true;
    o.min_time = "0.01";
  }
  if (o.repetitions * o.rounds < 9 && !quick)
    std::cerr << "compare: warning: " << o.repetitions * o.rounds
              << " samples a side are too few for a reliable U test (9 or more recommended)\n";
  o.seed = app.count("--seed") ? seed : lab::fresh_seed();

  compare::Manifest m;
  try {
    m = compare::load_manifest(manifest_path);
  } catch (const std::exception& e) {
    std::cerr << "compare: error: " << e.what() << "\n";
    return 2;
  }
  compare::describe_programs(m, 60);
  if (do_list) {
    if (chapter.empty() && md_path.empty()) {
      list(m);
      return 0;
    }
    if (chapter.empty()) {
      std::cerr << "compare: error: --list --markdown FILE writes one chapter's table: add --chapter N\n";
      return 2;
    }
    try {
      compare::Selection s;
      s.chapter = chapter;
      std::string command = "compare --list --chapter N --markdown FILE";
      if (!subfolder.empty()) {
        s.subfolder = subfolder;
        command = "compare --list --chapter N --subfolder " + subfolder + " --markdown FILE";
      }
      const std::string table = compare::programs_markdown(compare::select_programs(m, s), command);
      if (md_path.empty()) {  // the table to the terminal
        std::cout << table;
        return 0;
      }
      return write_file(md_path, table) ? 0 : 2;
    } catch (const std::exception& e) {
      std::cerr << "compare: error: " << e.what() << "\n";
      return 2;
    }
  }
  std::vector<const compare::Program*> programs;
  try {
    compare::Selection s;
    if (!chapter.empty()) s.chapter = chapter;
    if (!topic.empty()) s.topic = topic;
    programs = compare::select_programs(m, s);
  } catch (const std::exception& e) {
    std::cerr << "compare: error: " << e.what() << "\n";
    return 2;
  }
  // Demos are programs of their own: listed here, run directly.
  std::vector<const compare::Program*> runnable;
  for (const auto* p : programs) {
    if (p->kind == "demo")
      std::cerr << "compare: note: " << p->name << " is a demo, not a pair; run it directly (" << p->path << ")\n";
    else
      runnable.push_back(p);
  }
  programs = runnable;
  if (programs.empty()) return 0;
  // --shape is checked by the programs themselves, before anything runs: one program of each topic
  // reads the shapes as it would (--describe, no GPU), and a shape one of them refuses is exit 2 now.
  if (!o.shapes.empty()) {
    std::string refused;
    if (!compare::shapes_refused(programs, o.shapes, 60, refused)) {
      std::cerr << "compare: error: " << refused << "\n";
      return 2;
    }
  }
  std::string against_text;
  if (!against_path.empty()) {
    // Read and checked before anything runs: a bad file is a usage error now, not after the run.
    std::string error;
    against_text = read_previous_run(against_path, error);
    if (!error.empty()) {
      std::cerr << "compare: error: " << error << "\n";
      return 2;
    }
    if (!ignore_device)
      o.expect_device_uuid =
          compare::parse_run_file(against_text).value("device", nlohmann::json::object()).value("uuid", "");
  }
  // Nothing built (a fresh build folder, a chapter not made): an error now, after the command
  // line's values (each refused first), before a run of NOT-BUILT rows that would overwrite the
  // files asked for with an empty table.
  if (std::none_of(programs.begin(), programs.end(), [](const compare::Program* p) { return p->built; })) {
    const compare::Program& first = *programs.front();
    std::cerr << "compare: error: none of the " << programs.size() << " programs selected can run (" << first.name
              << ": " << first.describe_error << "); nothing written\n";
    return 2;
  }
  std::cerr << "compare: " << programs.size() << " programs x " << o.rounds << " rounds, " << o.repetitions
            << " repetitions each, cache " << o.cache << ", seed " << o.seed << "\n";
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  // The files asked for (--json, --csv, --markdown), from what has been collected. At the end, at
  // their paths. After each round but the last, beside them as PATH.unfinished (marked UNFINISHED,
  // k of N rounds), so that a run cut short (a Ctrl-C, a machine taken back) keeps the rounds it
  // finished and leaves an existing file at PATH as it was; the end removes them.
  const std::vector<std::string> paths = {json_path, csv_path, md_path};
  auto write_outputs = [&](const compare::Collected& got, const compare::Analysis& a, const compare::Meta& meta,
                           const std::string& suffix) {
    bool wrote = true;
    if (!json_path.empty()) wrote &= write_file(json_path + suffix, compare::to_json(got, a, meta).dump(2) + "\n");
    if (!csv_path.empty()) wrote &= write_file(csv_path + suffix, compare::csv(a, meta));
    if (!md_path.empty()) wrote &= write_file(md_path + suffix, compare::markdown(a, meta, &got));
    return wrote;
  };
  const std::string kUnfinished = ".unfinished";
  compare::AfterRound after_round;
  if (!json_path.empty() || !csv_path.empty() || !md_path.empty())
    after_round = [&](const compare::Collected& got, int rounds_done) {
      const compare::Meta meta = compare::make_meta(got, o, m.source_dir, command, rounds_done);
      if (write_outputs(got, compare::analyse(got, o.seed), meta, kUnfinished))
        std::cerr << "compare: " << rounds_done << " of " << o.rounds << " rounds done, kept in the files asked for"
                  << " with " << kUnfinished << " added to their names until the run ends\n";
    };
  const compare::Collected c = compare::run_programs(programs, o, std::cerr, after_round);
  if (c.no_gpu) {
    // The program's own line ("error: no usable CUDA device (...)") says why.
    std::cerr << "compare: " << c.no_gpu_message << "\n";
    return 3;
  }
  if (!c.other_device.empty()) {
    std::cerr << "compare: error: --against: the previous run was on another device than this one (" << c.other_device
              << "); stopped after the first program; pass --ignore-device to compare anyway\n";
    return 2;
  }
  const compare::Analysis a = compare::analyse(c, o.seed);
  const compare::Meta meta = compare::make_meta(c, o, m.source_dir, command);
  compare::print_table(std::cout, a, meta, color);

  int status = a.any_failure ? 1 : 0;
  if (!against_text.empty()) status = std::max(status, judge_against(against_text, c, a, ignore_device, color));
  if (write_outputs(c, a, meta, "")) {
    for (const std::string& path : paths)
      if (!path.empty()) {
        std::error_code ignored;  // none written (one round), or already gone
        std::filesystem::remove(path + kUnfinished, ignored);
      }
  } else {
    status = std::max(status, 2);
  }
  std::cerr << "compare: done in " << static_cast<int>(c.seconds) << " s\n";
  return status;
}
