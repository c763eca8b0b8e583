// A stand-in for a lab program, for compare's tests on machines without a GPU. Its behaviour
// follows its own name (compare's tests call it through symbolic links):
//   <role>_<topic>[_<what>]   role: baseline, optimized, library; what: step (or stepN: step N,
//                             8 - N us a run), crash, hang, wrong,
//                             garbage, nogpu, oom, na, lost (anything else behaves normally)
// lost: runs as normal in compare's first round and finds no device in the later ones (run with
// --no-check), as on a machine taken back in the middle of a run.
// It prints Google Benchmark JSON like a real program, with times that depend on the role.
#include <unistd.h>

#include "lab/contract.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  std::string self = argv[0];
  self = self.substr(self.find_last_of('/') + 1);
  const std::string role = self.substr(0, self.find('_'));
  std::string rest = self.substr(role.size() + 1);
  const std::string topic = rest.substr(0, rest.find('_'));
  const std::string what = rest.find('_') == std::string::npos ? "" : rest.substr(rest.find('_') + 1);
  // "step" is step 1, "stepN" step N; anything else the final optimized variant (1000).
  const int step = what.rfind("step", 0) == 0 ? (what.size() > 4 ? std::atoi(what.c_str() + 4) : 1) : 1000;
  int reps = 1;
  std::vector<std::string> shapes;
  // As the lab's programs do, a shape is read (and refused, exit 2) before anything else, --describe
  // included: here a shape is two positive extents, "RxC".
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--shape") {
      const std::string s = argv[i + 1];
      const auto x = s.find('x');
      if (x == std::string::npos || std::atoi(s.c_str()) <= 0 || std::atoi(s.c_str() + x + 1) <= 0) {
        std::cerr << "error: --shape " << s << ": expected 2 positive integers joined by 'x' (rowsxcols)\n";
        return 2;
      }
    }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--describe") {
      if (role == "demo") {
        std::cout << "{\"program\": \"" << self << "\", \"kind\": \"demo\", \"topic\": \"" << topic
                  << "\", \"chapter\": 1, \"role\": \"demo\", \"description\": \"a demo\", \"sweep\": []}\n";
        return 0;
      }
      std::cout << "{\"program\": \"" << self << "\", \"topic\": \"" << topic << "\", \"chapter\": 1, \"role\": \""
                << role << "\", \"step\": " << step << ", \"description\": \"fake " << what
                << "\", \"sweep\": [{\"shape\": \"64x64\"}, {\"shape\": \"128x256\"}]}\n";
      return 0;
    }
    if (a.rfind("--benchmark_repetitions=", 0) == 0) reps = std::atoi(a.c_str() + 24);
    if (a == "--shape" && i + 1 < argc) shapes.push_back(argv[++i]);
  }
  if (shapes.empty()) shapes = {"64x64", "128x256"};
  if (what == "crash") std::abort();
  if (what == "hang") std::this_thread::sleep_for(std::chrono::seconds(600));
  bool later_round = false;
  for (int i = 1; i < argc; ++i) later_round |= std::string(argv[i]) == "--no-check";
  if (what == "nogpu" || (what == "lost" && later_round)) {
    std::cerr << "error: no usable CUDA device (cudaErrorNoDevice: no CUDA-capable device is detected).\n";
    return 3;
  }
  if (what == "wrong") {
    std::cerr << "verification (2 shapes against a double-precision CPU reference):\n"
              << "  3x5: FAIL out: max_abs 1, max_rel 1, rel_l2 0.1 (exact tolerance): 1 of 15 elements outside\n"
              << "    out[1, 2]: got 1, expected 2\n"
              << "error: verification FAILED on 1 of 2 shapes (seed 7); not timing a wrong result\n";
    return 1;
  }
  if (what == "garbage") {
    std::cout << "this is not JSON {\n";
    return 0;
  }
  const double base = role == "baseline" ? 10e-6 : role == "library" ? 4e-6 : step < 1000 ? (8 - step) * 1e-6 : 5e-6;
  std::cout << "{\"context\": {\"lab_device\": \"Fake GPU\", \"lab_device_uuid\": \"GPU-fake\", \"lab_arch\": \"sm_90\", "
               "\"lab_driver\": \"13.0\", \"lab_runtime\": \"13.0\", \"lab_sm_clock_mhz\": \"1980\", "
               "\"lab_mem_clock_mhz\": \"2619\", \"library_build_type\": \"release\"},\n\"benchmarks\": [";
  bool first = true;
  for (const auto& s : shapes) {
    const auto x = s.find('x');
    const double elems = std::atof(s.substr(0, x).c_str()) * std::atof(s.substr(x + 1).c_str());
    for (int r = 0; r < reps; ++r) {
      std::cout << (first ? "" : ",") << "\n{\"name\": \"" << topic << "/" << self << "/" << s << "/manual_time\", ";
      first = false;
      if ((what == "oom" || what == "na") && s != shapes.front()) {
        // A shape that could not run: the contract's marker, then the message (lab/contract.hpp).
        const std::string message =
            what == "oom" ? std::string(lab::kOutOfMemoryMarker) +
                                "out of device memory: wanted 100 bytes (0.0 MiB), 10 bytes free (0.0 MiB) of 0.0 MiB"
                          : std::string(lab::kNotApplicableMarker) + "the fake kernel is written for 64x64 only";
        std::cout << "\"run_name\": \"" << topic << "/" << self << "/" << s
                  << "/manual_time\", \"run_type\": \"iteration\", \"error_occurred\": true, \"error_message\": \""
                  << message << "\", \"iterations\": 0, \"real_time\": 0, \"cpu_time\": 0, \"time_unit\": \"us\"}";
        continue;
      }
      const double t = base * elems / 4096.0 * (1.0 + 0.004 * std::sin(1.7 * r + elems));
      std::cout << "\"run_name\": \"" << topic << "/" << self << "/" << s
                << "/manual_time\", \"run_type\": \"iteration\", \"repetitions\": " << reps
                << ", \"repetition_index\": " << r << ", \"iterations\": 1000, \"real_time\": " << t * 1e6
                << ", \"cpu_time\": 1.0, \"time_unit\": \"us\", \"GB/s\": " << 8 * elems / t / 1e9 << "}";
    }
  }
  std::cout << "\n]}\n";
  if (what == "oom") {
    std::cerr << "error: 128x256: out of device memory: wanted 100 bytes\n";
    return 4;
  }
  return 0;
}
