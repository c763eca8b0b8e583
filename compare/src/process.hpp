// Running a program as a child process: its output captured, a time limit enforced on its whole
// process group. POSIX fork/exec with poll: no Debian-packaged library for this is available on
// both the CI and the GPU machines (reproc is not packaged; Boost.Process would add Boost).
#pragma once

#include <string>
#include <vector>

namespace compare {

struct ProcessResult {
  int exit_code = -1;     // when it exited normally
  int signal = 0;         // when a signal ended it (SIGSEGV, SIGABRT, ...)
  bool timed_out = false; // killed at the time limit
  bool failed_to_start = false;
  std::string out, err;
  double seconds = 0;
};

// Runs argv[0] (a path) with argv; kills its process group after timeout_s seconds.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s);

std::string signal_name(int sig);

}  // namespace compare
