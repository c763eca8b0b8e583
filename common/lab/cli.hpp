// CLI11 checks for the flags every lab command line shares, so that a demo and compare answer a
// bad value as a variant's program does: exit 2 with one line naming the flag and why, before the
// device is touched. A check creates and truncates nothing (lab::output_file_problem).
//   app.add_option("--seed", seed)->check(lab::cli::seed());
//   app.add_option("--csv", csv)->check(lab::cli::output_file());
//   app.add_option("--dump", dir)->check(lab::cli::output_dir());
#pragma once

#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "lab/check.hpp"
#include "lab/harness.hpp"

namespace lab::cli {

namespace detail {
// A CLI11 check from a function that says what is wrong with a value ("" when nothing is): its
// message names the value ('' when empty), CLI11 puts the flag before it.
inline CLI::Validator refusing(std::string (*problem)(const std::string&), std::string desc, std::string name) {
  return CLI::Validator(
      [problem](std::string& s) {
        const std::string why = problem(s);
        return why.empty() ? why : (s.empty() ? std::string("''") : s) + ": " + why;
      },
      std::move(desc), std::move(name));
}
inline std::string seed_problem_of(const std::string& s) { return seed_problem(s); }
}  // namespace detail

// A whole number from 0 to 2^64 - 1 (a sign, a letter, an empty value or an overflow is refused).
inline CLI::Validator seed() { return detail::refusing(detail::seed_problem_of, "SEED", "seed"); }
// A file that can be written: an existing writable file, or a new one in an existing writable folder.
inline CLI::Validator output_file() { return detail::refusing(output_file_problem, "FILE", "output file"); }
// A folder that exists and can be written, or that can be made.
inline CLI::Validator output_dir() { return detail::refusing(output_dir_problem, "DIR", "output folder"); }

}  // namespace lab::cli
