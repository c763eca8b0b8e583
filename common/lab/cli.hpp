// CLI11 checks for the flags every lab command line shares, so that a demo and compare answer a
// bad value as a variant's program does: exit 2 with one line naming the flag and why, before the
// device is touched. A check creates and truncates nothing (lab::output_file_problem).
//   app.add_option("--seed", seed)->check(lab::cli::seed());
//   app.add_option("--csv", csv)->check(lab::cli::output_file());
//   app.add_option("--dump", dir)->check(lab::cli::output_dir());
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "lab/check.hpp"
#include "lab/harness.hpp"

namespace lab::cli {

// A whole number from 0 to 2^64 - 1 (a sign, a letter, an empty value or an overflow is refused).
inline CLI::Validator seed() {
  return CLI::Validator(
      [](std::string& s) {
        const std::string why = seed_problem(s);
        return why.empty() ? why : (s.empty() ? std::string("''") : s) + ": " + why;
      },
      "SEED", "seed");
}
// A file that can be written: an existing writable file, or a new one in an existing writable folder.
inline CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& s) {
        const std::string why = output_file_problem(s);
        return why.empty() ? why : (s.empty() ? std::string("''") : s) + ": " + why;
      },
      "FILE", "output file");
}
// A folder that exists and can be written, or that can be made.
inline CLI::Validator output_dir() {
  return CLI::Validator(
      [](std::string& s) {
        const std::string why = output_dir_problem(s);
        return why.empty() ? why : (s.empty() ? std::string("''") : s) + ": " + why;
      },
      "DIR", "output folder");
}

}  // namespace lab::cli
