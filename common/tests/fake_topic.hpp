// A topic for CPU tests of the registry and the shared main: it never touches the device.
#pragma once

#include <string>
#include <vector>

#include "lab/lab.hpp"

struct FakeTopic {
  static constexpr const char* name = "fake";
  static constexpr int chapter = 1;
  static std::vector<std::string> dims() { return {"rows", "cols"}; }
  static std::vector<lab::Shape> sweep() { return {{64, 64}, {128, 256}}; }
  static std::vector<lab::Shape> checks() { return {{1, 1}, {3, 5}}; }
  static lab::Work work(const lab::Shape& s) { return {.bytes = 8.0 * s[0] * s[1], .flops = 2.0 * s[0] * s[1]}; }
  static std::string validate(const lab::Shape& s) { return s[1] > 1000 ? "at most 1000 columns" : ""; }
  static bool verifiable(const lab::Shape& s) { return s[0] != 7; }  // a topic's own limit
  static constexpr bool reads_declared_tolerance = true;               // its check takes a variant's bound
  struct Problem : lab::Problem {
    std::int64_t rows = 0;
    Problem(const lab::Shape& s, lab::Rng&) : rows(s[0]) {}
    void poison(cudaStream_t) override {}
    lab::Verdict verify() override {
      lab::Verdict v;
      v.tol = tolerance_or(lab::Tolerance::fp32());  // the bound it would judge by
      return v;
    }
  };
};

inline void fake_run(FakeTopic::Problem&, cudaStream_t) {}
