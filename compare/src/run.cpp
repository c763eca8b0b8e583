// Running the programs: one process per program and round, interleaved, each one's Google
// Benchmark JSON and its exit status turned into samples or a failure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "compare.hpp"
#include "lab/contract.hpp"
#include "lab/harness.hpp"
#include "lab/stats.hpp"

namespace compare {

std::vector<std::string> program_args(const Program& p, const RunOptions& o, int round) {
  std::vector<std::string> a{p.path, "--seed", std::to_string(o.seed), "--cache", o.cache,
                             "--benchmark_format=json", "--benchmark_repetitions=" + std::to_string(o.repetitions)};
  if (!o.min_time.empty()) a.push_back("--benchmark_min_time=" + o.min_time);
  if (round > 1) a.push_back("--no-check");  // verified in round 1, on the same seed
  if (!o.shapes.empty()) {
    for (const auto& s : o.shapes) a.insert(a.end(), {"--shape", s});
  } else if (o.quick && !p.sweep.empty()) {
    a.insert(a.end(), {"--shape", p.sweep.front()});
  }
  return a;
}

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The lines of a program's stderr that say what went wrong.
std::string failure_message(const std::string& err) {
  std::istringstream in(err);
  std::string line, picked;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.find("error:") != std::string::npos || line.find("FAIL") != std::string::npos ||
        line.find(": got ") != std::string::npos) {
      const auto start = line.find_first_not_of(' ');
      if (n++ < 6) picked += (picked.empty() ? "" : " | ") + trim(line.substr(start == std::string::npos ? 0 : start));
    }
  }
  if (picked.empty()) {
    // The last non-empty line, for programs that say nothing in the usual form.
    std::istringstream again(err);
    while (std::getline(again, line))
      if (!trim(line).empty()) picked = trim(line);
  }
  return picked.empty() ? "(no message)" : picked;
}

void add_samples(ProgramResult& pr, const BenchmarkRun& run, int round) {
  for (const auto& s : run.samples) {
    if (!pr.shapes.count(s.shape)) pr.shape_order.push_back(s.shape);
    Cell& c = pr.shapes[s.shape];
    c.samples.push_back(s.seconds);
    c.rounds.push_back(round);
    for (const auto& [k, v] : s.counters) c.counters[k].push_back(v);
  }
  for (const auto& e : run.errors) {
    if (!pr.shapes.count(e.shape)) pr.shape_order.push_back(e.shape);
    Cell& c = pr.shapes[e.shape];
    // The contract's markers (lab/contract.hpp): out of memory, not applicable; anything else failed.
    const auto starts = [&](const char* marker) { return e.message.rfind(marker, 0) == 0; };
    c.status = starts(lab::kOutOfMemoryMarker)     ? Status::oom
               : starts(lab::kNotApplicableMarker) ? Status::not_applicable
                                                   : Status::wrong;
    c.message = c.status == Status::not_applicable ? e.message.substr(std::string(lab::kNotApplicableMarker).size())
                                                   : e.message;
  }
}

}  // namespace

Collected run_programs(const std::vector<const Program*>& programs, const RunOptions& o, std::ostream& progress,
                       const AfterRound& after_round) {
  Collected c;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  for (const Program* p : programs) {
    ProgramResult pr;
    pr.program = p;
    if (!p->built) {
      pr.status = Status::not_built;
      pr.message = p->describe_error;
    }
    c.programs.push_back(std::move(pr));
  }
  const int total = static_cast<int>(programs.size()) * o.rounds;
  int k = 0;
  for (int round = 1; round <= o.rounds; ++round) {
    for (auto& pr : c.programs) {
      ++k;
      const Program& p = *pr.program;
      progress << "[" << k << "/" << total << "] round " << round << "/" << o.rounds << " " << p.name << ": ";
      if (pr.status != Status::ok) {
        progress << status_name(pr.status) << ", skipped\n" << std::flush;
        continue;
      }
      progress << std::flush;
      const ProcessResult r = run_process(program_args(p, o, round), o.timeout_s);
      pr.seconds += r.seconds;
      if (r.failed_to_start) {
        pr.status = Status::bad_output;
        pr.message = "could not start: " + r.err;
      } else if (r.timed_out) {
        pr.status = Status::timeout;
        pr.message = "no result within --timeout " + std::to_string(static_cast<int>(o.timeout_s)) + " s";
      } else if (r.signal) {
        pr.status = Status::crash;
        pr.message = "killed by " + signal_name(r.signal);
      } else if (r.exit_code == lab::kExitNoDevice) {
        c.no_gpu = true;
        c.no_gpu_message = failure_message(r.err);
        pr.status = Status::no_gpu;
        pr.message = c.no_gpu_message;
        progress << "NO-GPU\n";
        c.seconds = elapsed();
        return c;  // nothing else can run either
      } else if (r.exit_code == lab::kExitUsage) {
        pr.status = Status::usage;
        pr.message = failure_message(r.err);
      } else if (r.exit_code == lab::kExitWrongResult) {
        pr.status = Status::wrong;
        pr.message = failure_message(r.err);
      } else if (r.exit_code == lab::kExitOk || r.exit_code == lab::kExitOutOfMemory) {
        try {
          const BenchmarkRun run = parse_benchmark_json(r.out);
          add_samples(pr, run, round);
          for (const auto& [key, value] : run.context)
            if (key.rfind(lab::context::kPrefix, 0) == 0 && !c.context.count(key)) c.context[key] = value;
          if (const auto uuid = c.context.find("lab_device_uuid");
              !o.expect_device_uuid.empty() && uuid != c.context.end() && uuid->second != o.expect_device_uuid) {
            const auto name = c.context.find("lab_device");
            c.other_device = (name == c.context.end() ? std::string("?") : name->second) + ", " + uuid->second;
            progress << "another device (" << c.other_device << ")\n";
            c.seconds = elapsed();
            return c;  // the comparison the run is for cannot be made
          }
          if (r.exit_code == lab::kExitOutOfMemory && run.errors.empty()) {
            pr.status = Status::oom;
            pr.message = failure_message(r.err);
          }
        } catch (const std::exception& e) {
          const bool oom = r.exit_code == lab::kExitOutOfMemory;
          pr.status = oom ? Status::oom : Status::bad_output;
          pr.message = oom ? failure_message(r.err) : e.what();
        }
      } else {
        pr.status = Status::crash;
        pr.message = "exit status " + std::to_string(r.exit_code) + ": " + failure_message(r.err);
      }
      progress << status_name(pr.status) << " (" << std::fixed << std::setprecision(1) << r.seconds << " s; elapsed "
               << elapsed() << " s)" << std::defaultfloat << "\n"
               << std::flush;
    }
    if (after_round && round < o.rounds) {
      c.seconds = elapsed();
      after_round(c, round);
    }
  }
  c.seconds = elapsed();
  return c;
}

}  // namespace compare
