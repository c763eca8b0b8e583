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
  // The rounds asked for, where more than `rounds` (those measured): a file written while the run
  // was under way (compare's FILE.unfinished, which the run's end removes). 0: the run is complete.
  int rounds_planned = 0;
  std::uint64_t seed = 0;
  bool partial() const { return rounds_planned > rounds; }
  std::string line() const;  // one line: device, driver, CUDA, clocks, cache, samples, date, commit
};

// rounds_done: the rounds c holds, where fewer than o.rounds (a file written while the run is under
// way: Meta::partial); 0, every round.
Meta make_meta(const Collected& c, const RunOptions& o, const std::string& source_dir, const std::string& command,
               int rounds_done = 0);
std::string git_commit(const std::string& source_dir);
std::string format_time(double seconds);  // "7.27 us", "1.19 ms", "2.31 s"

void print_table(std::ostream& out, const Analysis& a, const Meta& m, bool color);
// With c, a second table lists every program's median time and counters at every shape.
std::string markdown(const Analysis& a, const Meta& m, const Collected* c = nullptr);

// The programs of a selection as a Markdown table, from their own --describe (topic, role, step,
// description), in the order compare runs them: what a chapter README shows between its
// <!-- results:programs:begin --> and <!-- results:programs:end --> markers. Throws
// std::runtime_error naming a program that is not built (it cannot describe itself).
// The table of programs a README shows, `command` the compare command that lists them.
std::string programs_markdown(const std::vector<const Program*>& programs,
                              const std::string& command = "compare --list --chapter N --markdown FILE");
std::string csv(const Analysis& a, const Meta& m);
nlohmann::json to_json(const Collected& c, const Analysis& a, const Meta& m);
// The one reader of a run file: parses it and checks what every consumer relies on (an object with
// "rows" and "programs" arrays, rows naming their variant, kind and shape). Throws
// std::runtime_error saying what is wrong.
nlohmann::json parse_run_file(const std::string& text);

// A saved run (--json), read back: the programs (kept in `programs`, which must outlive the
// result), their samples and counters, and the run's metadata. Throws std::runtime_error.
struct Replayed {
  std::vector<Program> programs;
  Collected collected;
  Meta meta;
};
void replay(const nlohmann::json& j, Replayed& out);
// Several saved runs of one device as one (compare --replay A.json --replay B.json): each run's
// programs and shapes, a program's shapes from several runs joined into one result. The runs must
// share the device (its UUID, else its name), the repetitions, rounds and cache; a program at a
// shape in two runs, or a program with a different status in two, is refused. The metadata is the
// first run's, with every run's dates, commits and commands (one each where all agree). `names`
// labels the runs in errors. Throws std::runtime_error saying what differs.
void merge_replays(const std::vector<nlohmann::json>& runs, const std::vector<std::string>& names, Replayed& out);
// A run saved before its programs' files named the step each comes after (no "after" in its JSON):
// each such program takes the manifest's `after` for its name, so a replay pairs the steps as a run
// now would. Programs whose run file names one, or that the manifest lacks, are left as they are.
void steps_after_from(const Manifest& m, Replayed& r);
void print_changes(std::ostream& out, const std::vector<Change>& changes, bool color);
void print_agreement(std::ostream& out, const Agreement& a);

}  // namespace compare
