// The shared main: turns the registered variant of a program into the lab's program contract
// (flags, verification, timing, exit statuses). A variant file never writes a main.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>

#include "lab/registry.hpp"
#include "lab/timing.hpp"
#include "lab/verify.hpp"

namespace lab {

struct Options {
  bool help = false;
  bool describe = false;
  bool check_only = false;
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
// is a UsageError naming the flag.
std::uint64_t parse_seed(std::string_view text);

// The variant as JSON: program, topic, chapter, role, description, dims, shapes with their work.
// compare reads it; it needs no GPU.
std::string describe_json(const Variant& v);

// The counter that says whether a timed region is GPU-bound or host-bound: the host's time in the
// variant's run (issuing work, and any wait it makes) over the GPU time between its events. Under
// kHostBoundShare the GPU had work queued the whole time; at or above, the GPU waited on the host
// (launch overheads, synchronous copies, allocations), and the time moves with the host's load.
inline constexpr const char* kHostShareCounter = "host_share";
inline constexpr double kHostBoundShare = 0.5;

// Timed shapes whose reference is cheap enough to compute on the CPU are verified too.
inline constexpr double kVerifyBytesLimit = double(1u << 30);
inline constexpr double kVerifyFlopsLimit = 4e9;
std::vector<Shape> shapes_to_verify(const TopicInfo& t, const std::vector<Shape>& timed);

// Makes the shape's inputs from the seed, poisons the outputs with NaN, runs the variant once and
// compares with the topic's double-precision reference.
Verdict check_variant(const Variant& v, const Shape& s, std::uint64_t seed, cudaStream_t stream);

// One measurement for the demos' reports: fresh inputs from the seed, a check against the reference
// first when `verify` (a wrong result throws Error naming the variant, the shape and the
// mismatch), then `reps` runs each timed after an L2 flush. Running out of device memory is a
// result (oom), not an error, so a sweep can go on. peak_mib: the device memory the operation's
// buffers held at most (MiB).
struct Measurement {
  std::optional<double> ms, peak_mib;  // median time; absent when oom
  bool oom = false, verified = false;
};
Measurement measure_variant(const Variant& v, const Shape& s, std::uint64_t seed, int reps, L2Flusher& flusher,
                            bool verify);

// The whole contract for the program's single registered variant; returns the exit status.
int run_main(int argc, char** argv);
int run_main(const Variant& v, int argc, char** argv);

}  // namespace lab
