// A small built-in profiler on CUPTI's activity API: what ran on the GPU (kernels, copies, memsets,
// each with its stream and its start and end on the GPU's clock), the CUDA runtime calls on the
// host threads, and the lab's NVTX ranges. Two views of one recording:
//   key_averages(): a per-name table in the spirit of PyTorch's key_averages() (calls, total,
//                   average, min, max, % of GPU time), sorted by total;
//   chrome_trace(): the Chrome trace-event format that Perfetto (ui.perfetto.dev) and
//                   chrome://tracing open: one track per stream, one per host thread, one for ranges.
// Every program has it: `--profile` prints the table, `--trace FILE.json` writes the trace. It runs
// as a pass of its own after the timing, so it never changes the timing table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>

namespace lab::prof {

enum class Kind { kernel, memcpy, memset, api, range };
const char* kind_name(Kind k);
inline bool on_gpu(Kind k) { return k == Kind::kernel || k == Kind::memcpy || k == Kind::memset; }

struct Record {
  Kind kind = Kind::kernel;
  std::string name;  // kernels demangled; copies "memcpy HtoD (pinned -> device)"; API calls by name
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;  // GPU records
  std::uint32_t thread = 0;  // API calls and ranges
  std::uint64_t bytes = 0;   // copies and memsets
  double seconds() const { return static_cast<double>(end_ns - start_ns) * 1e-9; }
};

struct Row {
  std::string name;
  Kind kind = Kind::kernel;
  int calls = 0;
  double total_us = 0, avg_us = 0, min_us = 0, max_us = 0;
  double percent = 0;  // of all GPU time in the records
};

// GPU records (kernels, copies, memsets) grouped by kind and name, sorted by total time.
std::vector<Row> key_averages(const std::vector<Record>& records);
// The table as text, names cut to `name_width` characters ("(anonymous namespace)::" dropped).
std::string format_table(const std::vector<Row>& rows, std::size_t name_width = 64);
// The records as a Chrome trace-event JSON document; times relative to the earliest record.
std::string chrome_trace(const std::vector<Record>& records, std::string_view process_name);

// "_Z6squarePfi" -> "square(float*, int)"; a name that is not mangled comes back unchanged.
std::string demangle(const char* name);

// Records every activity of the process while it lives: one at a time. Construct it after the
// CUDA context exists; stop() flushes and returns the records sorted by start. Throws lab::Error
// (exit status 1) when CUPTI cannot trace, e.g. another profiler holds it.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  std::vector<Record> stop();

 private:
  bool stopped_ = false;
};

// The clock the records use (CUPTI's, in ns).
std::uint64_t now_ns();
// The id a stream's records carry (Record::stream, the trace's "stream N" tracks).
std::uint32_t stream_id(cudaStream_t s);

// A named phase: an NVTX range for Nsight Systems, and a record for --trace while a Session runs.
class Range {
 public:
  explicit Range(std::string name);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  std::string name_;
  std::uint64_t start_ = 0;
  bool recording_ = false;
};

}  // namespace lab::prof
