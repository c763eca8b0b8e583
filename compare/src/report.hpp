// compare's outputs: the terminal table, Markdown (for the chapter READMEs), CSV and JSON (with
// the raw samples). Each carries the device, driver, CUDA version, clocks, date and git commit.
#pragma once

#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "compare.hpp"

namespace compare {

struct Meta {
  std::string date, commit, command;
  std::string device, uuid, arch, driver, runtime, sm_clock_mhz, mem_clock_mhz, cache, peak_copy_gbs, peak_fp32_tflops;
  int repetitions = 0, rounds = 0;
  std::uint64_t seed = 0;
  std::string line() const;  // one line: device, driver, CUDA, clocks, cache, samples, date, commit
};

Meta make_meta(const Collected& c, const RunOptions& o, const std::string& source_dir, const std::string& command);
std::string git_commit(const std::string& source_dir);
std::string format_time(double seconds);  // "7.27 us", "1.19 ms", "2.31 s"

void print_table(std::ostream& out, const Analysis& a, const Meta& m, bool color);
// With c, a second table lists every program's median time and counters at every shape.
std::string markdown(const Analysis& a, const Meta& m, const Collected* c = nullptr);
std::string csv(const Analysis& a, const Meta& m);
nlohmann::json to_json(const Collected& c, const Analysis& a, const Meta& m);

// A saved run (--json), read back: the programs (kept in `programs`, which must outlive the
// result), their samples and counters, and the run's metadata. Throws std::runtime_error.
struct Replayed {
  std::vector<Program> programs;
  Collected collected;
  Meta meta;
};
void replay(const nlohmann::json& j, Replayed& out);
void print_changes(std::ostream& out, const std::vector<Change>& changes, bool color);
void print_agreement(std::ostream& out, const Agreement& a);

}  // namespace compare
