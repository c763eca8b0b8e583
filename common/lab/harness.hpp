// The shared main: turns the registered variant of a program into the lab's program contract
// (flags, verification, timing, exit statuses). A variant file never writes a main.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>

#include "lab/contract.hpp"
#include "lab/profiler.hpp"
#include "lab/registry.hpp"
#include "lab/timing.hpp"
#include "lab/verify.hpp"

namespace lab {

struct Options {
  bool help = false;
  bool describe = false;
  bool check_only = false;
  bool skip_check_set = false;  // --skip-check-set: verify the --shape shapes alone (with --check-only)
  bool no_check = false;
  bool remeasure_peaks = false;
  bool profile = false;     // --profile: the per-kernel table, from a pass of its own after the timing
  std::string trace;        // --trace FILE: a Chrome trace of that pass
  std::vector<Shape> shapes;  // empty: the topic's sweep
  CacheMode cache = CacheMode::cold;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> benchmark_args;  // --benchmark_* flags, passed to Google Benchmark
  bool machine_readable = false;            // stdout carries JSON or CSV: human text goes to stderr
};

// Parses the program's arguments (without argv[0]). Throws UsageError naming the flag and the
// problem. Unknown flags other than Google Benchmark's are errors.
Options parse_options(const Variant& v, const std::vector<std::string>& args);
std::string help_text(const Variant& v);
// --seed's value: a whole number in [0, 2^64 - 1]; anything else (a sign, a letter, an overflow)
// is a UsageError naming the flag. seed_problem: "" for a good value, else why not.
std::uint64_t parse_seed(std::string_view text);
std::string seed_problem(std::string_view text);

// The variant as JSON: program, topic, chapter, role, description, dims, shapes with their work.
// compare reads it; it needs no GPU.
std::string describe_json(const Variant& v);

// The topic's check shapes (unless with_check_set is false: --skip-check-set), and the timed shapes
// within kVerifyBytesLimit and kVerifyFlopsLimit (contract.hpp) that the topic can verify.
std::vector<Shape> shapes_to_verify(const TopicInfo& t, const std::vector<Shape>& timed, bool with_check_set = true);
// A variant's check set: its topic's check shapes and those it declares itself (Declared::checks).
std::vector<Shape> check_set(const Variant& v);
// shapes_to_verify with the variant's check set in place of its topic's.
std::vector<Shape> shapes_to_verify(const Variant& v, const std::vector<Shape>& timed, bool with_check_set = true);

// The problem for a shape, its inputs made from the seed, and the variant's state for it (its
// prepare step, run and synchronized here: nothing of it is timed).
struct Prepared {
  std::unique_ptr<Problem> problem;
  std::unique_ptr<Instance> instance;  // destroyed before the problem it was made for
  Prepared() = default;
  Prepared(Prepared&&) = default;
  Prepared& operator=(Prepared&& o) noexcept {
    instance = std::move(o.instance);
    problem = std::move(o.problem);
    return *this;
  }
  ~Prepared() { instance.reset(); }
};
Prepared prepare(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream);

// "" when the variant runs the shape on this device, otherwise its reason (Variant::supports).
std::string unsupported(const Variant& v, const Shape& s);

// Poisons the problem's outputs with NaN, runs the instance once on it and compares with the
// topic's reference: check_variant's run, for a caller that keeps the prepared problem between
// runs (a second step from the first one's result).
Verdict run_and_verify(Instance& instance, Problem& p, cudaStream_t stream);

// Makes the shape's inputs from the seed and the variant's state, poisons the outputs with NaN,
// runs the variant once and compares with the topic's double-precision reference. The shape must
// be supported (unsupported() is ""): a check of a shape the variant cannot run throws Error.
Verdict check_variant(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream);

// A profiled pass of one shape, under the caller's prof::Session (a program's --profile and
// --trace, the sweep report's): the problem made from the seed, `warmup` untimed runs, then `runs`
// back to back (no L2 flush), in the ranges "setup LABEL", "warm-up LABEL" and "profiled LABEL".
// Returns the window of the profiled runs on CUPTI's clock: holds() picks their records out of
// the session's. The shape must be supported (unsupported() is "").
struct RunWindow {
  std::uint64_t begin = 0, end = 0;
  bool holds(const prof::Record& r) const { return r.start_ns >= begin && r.start_ns <= end; }
};
RunWindow profiled_runs(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream, int warmup,
                        int runs, const std::string& label);

// One measurement for the demos' reports: fresh inputs from the seed, a check against the reference
// first when `verify` (a wrong result throws Error naming the variant, the shape and the
// mismatch), then `warmup` untimed runs and `reps` runs each timed after an L2 flush. Running out
// of device memory is a result (oom), not an error, so a sweep can go on. peak_mib: the device
// memory the operation's buffers held at most (MiB).
struct Measurement {
  std::optional<double> ms, peak_mib;  // median time; absent when oom or not applicable
  std::optional<double> mean_ms;       // the runs' mean, as the users' scripts report it
  std::optional<double> std_ms;        // their sample standard deviation (n - 1); absent for one run
  bool oom = false, verified = false;
  std::string not_applicable;  // the variant does not support the shape: why (nothing was run)
};
Measurement measure_variant(const Variant& v, const Shape& s, std::uint64_t seed, int reps, L2Flusher& flusher,
                            bool verify, int warmup = 3);

// The registry's variants for a main: Registry::global().variants(), or, where registration
// refused some (Registry::add), nothing, with the reasons reported on stderr; the caller then
// returns kExitUsage.
std::optional<std::vector<const Variant*>> registered_variants();

// The whole contract for the program's single registered variant; returns the exit status.
int run_main(int argc, char** argv);
int run_main(const Variant& v, int argc, char** argv);

}  // namespace lab
