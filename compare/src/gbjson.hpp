// Reading the Google Benchmark JSON a lab program writes (the 1.7 and 1.8 formats).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace compare {

// One repetition of one shape: its time per iteration (seconds, GPU time) and its counters.
struct Sample {
  std::string topic, program, shape;
  double seconds = 0;
  std::map<std::string, double> counters;
};

// A shape the program could not time (SkipWithError): out of memory, a GPU fault, ...
struct ShapeError {
  std::string topic, program, shape, message;
};

struct BenchmarkRun {
  std::map<std::string, std::string> context;  // string fields of "context" (the lab_* keys among them)
  std::vector<Sample> samples;                  // run_type "iteration" rows only
  std::vector<ShapeError> errors;
};

// Throws std::runtime_error naming what is wrong when the text is not such JSON.
BenchmarkRun parse_benchmark_json(const std::string& text);

// Google Benchmark writes NaN and infinities as bare words (NaN, -nan, inf: the coefficient of
// variation of a counter that is 0 in every repetition is 0/0), which JSON has no word for. This
// turns them into null outside strings; a counter that is not a number is then left out.
std::string null_non_finite(const std::string& text);

}  // namespace compare
