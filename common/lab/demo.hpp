// The main of a demo: a program of its own rather than a baseline/optimized pair, with the lab's
// contract all the same: --help, --describe (JSON, no GPU), the exit statuses, one clear line on error.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lab/check.hpp"
#include "lab/cli.hpp"
#include "lab/memory.hpp"

namespace lab {

// Text helpers for the demos' tables: x with `decimals` digits after the point; the strings joined.
inline std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}
inline std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}
// One row of a demo's table: "| a | b |" in Markdown, else the cells two spaces apart.
inline void table_row(std::ostream& o, const std::vector<std::string>& cells, bool markdown) {
  if (markdown) {
    o << "|";
    for (const auto& c : cells) o << " " << c << " |";
  } else {
    for (std::size_t i = 0; i < cells.size(); ++i) o << (i ? "  " : "") << cells[i];
  }
  o << "\n";
}

// Writes a demo's output file (CSV, Markdown, JSON) whole and says so on stderr ("wrote <what>
// to <path>"); a file that cannot be written is lab::Error naming it. A regular file (or a new one)
// is written beside it first and renamed over it, so a run stopped while writing leaves the old
// file whole, never half of the new one (a report rewrites its CSV after every configuration);
// anything else (/dev/stdout) is written in place. A write that fails (a full disk) removes the file
// beside it: the old file stays as it was, and nothing else is left behind.
inline void write_output(const std::string& path, const std::string& text, const std::string& what) {
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  const bool replace = kind == std::filesystem::file_type::not_found || kind == std::filesystem::file_type::regular;
  const std::string target = replace ? path + ".partial" : path;
  const auto fail = [&](const std::string& why, bool written) {
    if (replace && written) std::filesystem::remove(target, ec);  // only the file this call made
    throw Error(path + ": write failed" + why);
  };
  {
    std::ofstream f(target);
    if (!f.is_open()) fail("", false);
    f << text;
    f.flush();
    f.close();
    if (!f) fail("", true);
  }
  if (replace) {
    std::filesystem::rename(target, path, ec);
    if (ec) fail(" (" + ec.message() + ")", true);
  }
  std::cerr << "wrote " << what << " to " << path << "\n";
}

// Before any work: an output file that could not be written later is a usage error now ("NAME
// PATH: cannot write"), so a long run's results are never lost to a typo. An existing file is opened
// to append (its contents untouched); a new one is made and removed again, so a run that stops
// early leaves no empty file behind. An empty path is no file: nothing to check.
inline void check_writable(const std::string& path, const std::string& name = "") {
  if (path.empty()) return;
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  if (!std::ofstream(path, std::ios::app))
    throw UsageError((name.empty() ? "" : name + " ") + path + ": cannot write");
  if (!existed) std::filesystem::remove(path, ec);
}

struct DemoInfo {
  std::string program, topic, description;
  int chapter = 0;
};

// `options` adds the demo's flags; `body` runs it and returns the exit status. lab::Error and its
// kinds (usage, no device, out of memory) become their exit statuses.
inline int demo_main(int argc, char** argv, const DemoInfo& d, const std::function<void(CLI::App&)>& options,
                     const std::function<int()>& body) {
  CLI::App app{d.program + ": " + d.description, d.program};
  bool describe = false;
  double limit_gib = 0;
  options(app);
  app.add_option("--memory-limit", limit_gib,
                 "cap the lab's own device allocations at this many GiB (0, the default: no cap); an "
                 "allocation above it is out of memory, as on a smaller GPU, so that the OOM rows can be "
                 "met on purpose")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--describe", describe, "print this program's description as JSON and exit (no GPU needed)");
  app.footer(exit_status_help());
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << " (see --help)\n";
    return kExitUsage;
  }
  if (describe) {
    std::cout << "{\"program\": \"" << d.program << "\", \"kind\": \"demo\", \"chapter\": " << d.chapter
              << ", \"role\": \"demo\", \"topic\": \"" << d.topic << "\", \"description\": \"" << d.description
              << "\", \"sweep\": []}\n";
    return kExitOk;
  }
  set_device_memory_limit(static_cast<std::size_t>(limit_gib * double(std::size_t{1} << 30)));
  return run_reporting_errors(body);
}

}  // namespace lab
