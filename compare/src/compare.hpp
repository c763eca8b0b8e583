// compare: runs a chapter's lab programs as subprocesses, interleaved over rounds, and judges
// each optimized variant against its baseline (and the step before it, and the library) with
// medians, a bootstrap confidence interval, a Mann-Whitney U test and a verdict.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gbjson.hpp"
#include "process.hpp"

namespace compare {

// not_applicable: the variant does not support the shape (its reason in the message); not a failure.
enum class Status { ok, wrong, crash, timeout, oom, no_gpu, not_built, bad_output, usage, not_applicable };
const char* status_name(Status);

struct Program {
  // From the manifest.
  std::string name, path, folder, source, make_target, chapter_target;
  std::string kind = "variant";  // or "demo": a program of its own, listed but not run by compare
  // The ladder step this one changes, where it is not the step before it in the list (its file's
  // "// lab-after: PROGRAM" line); empty: the step before it.
  std::string after;
  int chapter = 0;
  // From `program --describe`.
  bool built = false;
  std::string topic, role, description;
  int step = 0;
  std::vector<std::string> sweep;
  std::string describe_error;  // why it cannot run (not built, --describe failed), without its name
};

struct Manifest {
  std::string path, build_dir, source_dir;
  std::vector<Program> programs;
};

// Throws std::runtime_error with the path and the problem.
Manifest load_manifest(const std::string& path);
// Runs `--describe` on every built program (no GPU needed) to learn its topic, role and shapes.
void describe_programs(Manifest& m, double timeout_s);
// The --shape values checked by the programs themselves before anything runs: one program of each
// topic among `programs` reads them as it would (`--describe --shape ...`, no GPU). False, with
// `refused` naming the topic, the program and its own message, when one of them answers bad usage.
bool shapes_refused(const std::vector<const Program*>& programs, const std::vector<std::string>& shapes,
                    double timeout_s, std::string& refused);

struct Selection {
  std::optional<std::string> chapter;  // "1", "01", "ch01" or "ch01_basics"
  std::optional<std::string> topic;  // neither: every program
  // With a chapter: the programs whose source lies in this subfolder of the chapter's folder
  // ("attention": ch04_compile_vs_fused/attention/ and the folders below it).
  std::optional<std::string> subfolder;
};
// Programs of the selection, ordered by chapter, topic, then baseline, optimized steps, optimized,
// library (demos last). Throws std::invalid_argument naming what exists when nothing matches.
std::vector<const Program*> select_programs(const Manifest& m, const Selection& s);

struct RunOptions {
  int repetitions = 3;  // Google Benchmark repetitions per program run
  int rounds = 4;       // ABAB rounds: samples per side = repetitions * rounds
  bool quick = false;   // each topic's first (smallest) sweep shape only
  std::vector<std::string> shapes;
  double timeout_s = 600;
  std::string cache = "cold";
  std::uint64_t seed = 0;
  std::string min_time;  // --benchmark_min_time for the programs ("" keeps theirs)
  // With --against (and no --ignore-device): the previous run's device UUID. The run stops at the
  // first program that reports another device, rather than after minutes of work nothing can use.
  std::string expect_device_uuid;
};

struct Cell {
  std::vector<double> samples;  // seconds per iteration, one per repetition
  std::vector<int> rounds;      // the round (program run) of each sample; empty: one group
  std::map<std::string, std::vector<double>> counters;
  Status status = Status::ok;
  std::string message;
};

struct ProgramResult {
  const Program* program = nullptr;
  Status status = Status::ok;
  std::string message;
  std::vector<std::string> shape_order;
  std::map<std::string, Cell> shapes;
  double seconds = 0;
};

struct Collected {
  std::vector<ProgramResult> programs;
  std::map<std::string, std::string> context;  // lab_* keys from the programs' JSON
  bool no_gpu = false;
  std::string no_gpu_message;
  std::string other_device;  // set when a program reported a device other than expect_device_uuid
  double seconds = 0;
};

// Runs every program `rounds` times, interleaved, verifying in the first round only. Progress
// lines go to `progress`. Stops early when there is no usable GPU (Collected::no_gpu) or the
// device is not the one RunOptions::expect_device_uuid names (Collected::other_device).
// after_round, when given, is called with what has been collected once each round but the last is
// complete (every program run that many times): compare writes the rounds so far there (beside the
// files asked for, as FILE.unfinished), so that a run cut short keeps the rounds it finished.
using AfterRound = std::function<void(const Collected&, int rounds_done)>;
Collected run_programs(const std::vector<const Program*>& programs, const RunOptions& o, std::ostream& progress,
                       const AfterRound& after_round = {});

// Builds the arguments of one program run (exposed for tests).
std::vector<std::string> program_args(const Program& p, const RunOptions& o, int round);

struct Row {
  int chapter = 0;
  std::string topic, shape, variant, against;
  std::string kind;  // "vs baseline", "vs previous step", "vs library"
  Status status = Status::ok;
  std::string message;
  double base_median = NAN, var_median = NAN;  // seconds
  double speedup = NAN, ci_lo = NAN, ci_hi = NAN, p = NAN;
  // The round-level 95% interval (lab::stats::round_ratio_t_interval: one speedup per round, a
  // t-interval over the rounds), widened to [ci_lo, ci_hi] where that is wider; NaN with fewer than
  // two rounds. --against judges host-bound rows by it.
  double round_lo = NAN, round_hi = NAN;
  std::string verdict;  // FASTER, SLOWER, SAME, NOISY; or the failure status
  double gbs = NAN;     // the variant's median GB/s
  std::size_t n_base = 0, n_var = 0;
  // Whether the timed regions were GPU-bound or host-bound: each side's median host_share counter
  // (the host's time in the run over the GPU time); "GPU" when both are under lab::kHostBoundShare,
  // "host" when either is at or above it, "" when a side did not report it.
  double base_host_share = NAN, var_host_share = NAN;
  std::string bound;
};

struct ChapterSummary {
  int chapter = 0;
  std::string folder;
  double geomean = NAN;  // final optimized over baseline, over matched shapes only
  int matched = 0;
};

struct Analysis {
  std::vector<Row> rows;
  std::vector<ChapterSummary> chapters;
  bool any_failure = false;
};

// FASTER/SLOWER: p < 0.05, the interval excludes 1 and the change is at least 2%; SAME: the
// interval lies within 5% of 1; otherwise NOISY.
std::string verdict_for(double speedup, double ci_lo, double ci_hi, double p);

Analysis analyse(const Collected& c, std::uint64_t seed);

// A cell's samples grouped by round (one group per program run), for the grouped bootstrap.
std::vector<std::vector<double>> sample_groups(const Cell& c);

// --against: this run against a saved compare JSON.
struct Change {
  std::string program, shape;
  double before = NAN, after = NAN;  // medians, seconds
  double ratio = NAN;                // before / after: above 1 is faster now
  double p = NAN;
  std::string verdict;  // IMPROVED, REGRESSED, SAME, NOISY
};
std::vector<Change> against(const std::string& previous_json_text, const Collected& now, bool ignore_device,
                            std::string& error);

// --against, row by row: do two runs tell the same story? The agreement rule: a GPU-bound row
// (both sides' timed regions kept the GPU busy) agrees when the two speedups are within 5%; a
// host-bound row (or one whose bound is unknown), whose times move with the host's load from one
// process to the next, agrees when the two runs' round-level 95% intervals overlap (each run's
// interval is its own uncertainty; a previous run saved without one is held to this run's
// interval alone). Verdicts that differ are reported beside it.
inline constexpr double kGpuBoundAgreementPct = 5.0;
struct RowChange {
  std::string variant, kind, against, shape;
  double before = NAN, after = NAN;  // speedups
  double diff_pct = NAN;             // after / before - 1, in %
  std::string verdict_before, verdict_after;
  bool within_ci = false;  // the previous speedup lies inside this run's 95% interval
  // The two runs' round-level 95% intervals (a previous run saved without one: its bootstrap ci95).
  double before_lo = NAN, before_hi = NAN, after_lo = NAN, after_hi = NAN;
  bool intervals_overlap = false;
  std::string bound;       // this run's: "GPU", "host" or ""
  std::string rule;        // "within 5%" (GPU-bound) or "intervals overlap" (host-bound or unknown)
  bool agrees = false;
};
struct Agreement {
  std::vector<RowChange> rows;
  int verdicts_differ = 0;
  int over_5pct = 0;
  int gpu_rows = 0, host_rows = 0;        // rows judged by each rule
  int gpu_failed = 0, host_failed = 0;    // of those, rows that did not agree
  const RowChange* largest = nullptr;
  bool agrees() const { return gpu_failed == 0 && host_failed == 0; }
};
// Throws std::runtime_error naming the problem when the text is not a saved compare --json run
// (read before anything runs, so a bad file costs no run).
void validate_previous_run(const std::string& previous_json_text);
// Throws std::runtime_error when the previous run is not compare JSON.
Agreement row_agreement(const std::string& previous_json_text, const Analysis& now);

}  // namespace compare
