#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compare.hpp"
#include "gbjson.hpp"
#include "process.hpp"
#include "report.hpp"

namespace {

namespace fs = std::filesystem;
using compare::Status;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// --- Google Benchmark JSON ------------------------------------------------------------------

TEST(BenchmarkJson, ReadsGoogleBenchmark17) {
  const auto run = compare::parse_benchmark_json(read(fs::path(FIXTURES) / "gbench-1.7.1-debian.json"));
  EXPECT_EQ(run.context.at("lab_device"), "Fake GPU");
  EXPECT_EQ(run.context.at("library_build_type"), "debug");  // as Debian builds it
  ASSERT_EQ(run.samples.size(), 6u);  // 2 shapes x 3 repetitions; aggregates skipped
  const auto& s = run.samples.front();
  EXPECT_EQ(s.topic, "fake");
  EXPECT_EQ(s.program, "optimized_fake");
  EXPECT_EQ(s.shape, "64x64");
  EXPECT_NEAR(s.seconds, 2.02e-6, 0.02e-6);  // microseconds in the file
  EXPECT_DOUBLE_EQ(s.counters.at("GB/s"), 100.0);
  EXPECT_FALSE(s.counters.count("iterations"));
  ASSERT_EQ(run.errors.size(), 1u);  // one errored shape, reported once
  EXPECT_EQ(run.errors[0].shape, "100000x100000");
  EXPECT_NE(run.errors[0].message.find("out of device memory"), std::string::npos);
}

TEST(BenchmarkJson, ReadsGoogleBenchmark18FromTheH100) {
  const auto run = compare::parse_benchmark_json(read(fs::path(FIXTURES) / "gbench-1.8.3-h100.json"));
  EXPECT_EQ(run.context.at("lab_device"), "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(run.samples.size(), 5u);
  for (const auto& s : run.samples) {
    EXPECT_EQ(s.program, "optimized_coalescing");
    EXPECT_EQ(s.shape, "8192x8192");
    EXPECT_GT(s.seconds, 100e-6);
    EXPECT_LT(s.seconds, 400e-6);
    EXPECT_GT(s.counters.at("GB/s"), 1000.0);
  }
  EXPECT_TRUE(run.errors.empty());
}

TEST(GbJson, NonFiniteNumbersBecomeNullAndTheirCountersAreLeftOut) {
  EXPECT_EQ(compare::null_non_finite(R"({"a": NaN, "b": -nan, "c": inf, "d": "NaN inf", "e": "q\"NaN"})"),
            R"({"a": null, "b": null, "c": null, "d": "NaN inf", "e": "q\"NaN"})");
  const auto run = compare::parse_benchmark_json(R"({"benchmarks": [
    {"name": "t/p/8/manual_time", "run_name": "t/p/8/manual_time", "run_type": "iteration", "real_time": 2.0,
     "time_unit": "us", "ok": 1.5, "zero_cv": -nan},
    {"name": "t/p/8/manual_time_cv", "run_name": "t/p/8/manual_time", "run_type": "aggregate", "real_time": 0.1,
     "time_unit": "us", "zero_cv": NaN}]})");
  ASSERT_EQ(run.samples.size(), 1u);
  EXPECT_EQ(run.samples[0].counters.count("ok"), 1u);
  EXPECT_EQ(run.samples[0].counters.count("zero_cv"), 0u);
}

TEST(BenchmarkJson, GarbageIsAnError) {
  EXPECT_THROW(compare::parse_benchmark_json("not json"), std::runtime_error);
  EXPECT_THROW(compare::parse_benchmark_json("{\"context\": {}}"), std::runtime_error);
  EXPECT_THROW(compare::parse_benchmark_json("{\"benchmarks\": [{\"name\": \"a/b\"}]}"), std::runtime_error);
  EXPECT_THROW(compare::parse_benchmark_json(
                   R"({"benchmarks": [{"name": "t/p/1x1", "run_type": "iteration", "real_time": 1, "time_unit": "fortnights"}]})"),
               std::runtime_error);
}

// --- verdicts ----------------------------------------------------------------------------

TEST(Verdict, Rules) {
  EXPECT_EQ(compare::verdict_for(2.0, 1.9, 2.1, 0.001), "FASTER");
  EXPECT_EQ(compare::verdict_for(0.5, 0.45, 0.55, 0.001), "SLOWER");
  EXPECT_EQ(compare::verdict_for(1.01, 1.005, 1.015, 0.001), "SAME");   // significant but under 2%
  EXPECT_EQ(compare::verdict_for(1.0, 0.98, 1.02, 0.6), "SAME");
  EXPECT_EQ(compare::verdict_for(1.3, 0.8, 1.9, 0.2), "NOISY");
  EXPECT_EQ(compare::verdict_for(1.5, 1.1, 1.9, 0.2), "NOISY");         // interval clear but p too large
  EXPECT_EQ(compare::verdict_for(NAN, NAN, NAN, NAN), "NOISY");
}

// --- subprocesses --------------------------------------------------------------------------

TEST(Process, CapturesOutputAndExitStatus) {
  const auto r = compare::run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"}, 10);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.timed_out);
}

TEST(Process, ReportsSignals) {
  const auto r = compare::run_process({"/bin/sh", "-c", "kill -SEGV $$"}, 10);
  EXPECT_EQ(r.signal, SIGSEGV);
}

TEST(Process, KillsAtTheTimeLimit) {
  const auto r = compare::run_process({"/bin/sh", "-c", "sleep 30"}, 0.5);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5.0);
}

TEST(Process, MissingProgram) {
  const auto r = compare::run_process({"/nonexistent/program"}, 5);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("cannot run"), std::string::npos);
}

// --- runs against fake programs --------------------------------------------------------------

class FakeLab : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("compare-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "ch01_basics");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a manifest of links to the fake program; a name in `missing` gets no link (not built).
  // `after`: a program's "after" entry (its file's lab-after line), by name.
  fs::path manifest(const std::vector<std::string>& names, const std::vector<std::string>& missing = {},
                    const std::map<std::string, std::string>& after = {}) {
    nlohmann::json progs = nlohmann::json::array();
    for (const auto& n : names) {
      const fs::path link = dir_ / "ch01_basics" / n;
      if (std::find(missing.begin(), missing.end(), n) == missing.end()) fs::create_symlink(FAKE_PROGRAM, link);
      progs.push_back({{"program", n}, {"kind", n.rfind("demo_", 0) == 0 ? "demo" : "variant"}, {"chapter", 1}, {"folder", "ch01_basics"}, {"source", "ch01_basics/" + n + ".cu"},
                       {"make_target", n}, {"chapter_target", "ch01"}, {"path", link.string()}});
      if (after.count(n)) progs.back()["after"] = after.at(n);
    }
    const fs::path m = dir_ / "manifest.json";
    std::ofstream(m) << nlohmann::json{{"format", 1}, {"build_dir", dir_.string()}, {"programs", progs}}.dump(2);
    return m;
  }

  // The manifest at m, its programs described (as compare does before anything else).
  static compare::Manifest described(const fs::path& m) {
    compare::Manifest man = compare::load_manifest(m.string());
    compare::describe_programs(man, 10);
    return man;
  }

  compare::Collected run(const fs::path& m, compare::RunOptions o = {}, const compare::AfterRound& after_round = {}) {
    manifest_ = described(m);
    compare::Selection s;
    s.chapter = "1";
    o.seed = 7;
    std::ostringstream progress;
    auto c = compare::run_programs(compare::select_programs(manifest_, s), o, progress, after_round);
    progress_ = progress.str();
    return c;
  }

  const compare::Row* row(const compare::Analysis& a, const std::string& variant, const std::string& kind,
                          const std::string& shape = "64x64") {
    for (const auto& r : a.rows)
      if (r.variant == variant && r.kind == kind && (r.shape == shape || r.shape.empty())) return &r;
    return nullptr;
  }

  fs::path dir_;
  compare::Manifest manifest_;
  std::string progress_;
};

TEST_F(FakeLab, SpeedupsStepsAndLibrary) {
  const auto m = manifest({"baseline_fake", "optimized_fake_step", "optimized_fake", "library_fake"});
  compare::RunOptions o;
  o.repetitions = 5;
  o.rounds = 2;
  const auto c = run(m, o);
  EXPECT_FALSE(c.no_gpu);
  ASSERT_EQ(c.programs.size(), 4u);
  EXPECT_EQ(c.programs[0].program->name, "baseline_fake");  // baseline, step, final, library
  EXPECT_EQ(c.programs[1].program->name, "optimized_fake_step");
  EXPECT_EQ(c.programs[3].program->name, "library_fake");
  EXPECT_EQ(c.programs[2].shapes.at("128x256").samples.size(), 10u);  // 5 repetitions x 2 rounds
  const auto a = compare::analyse(c, 7);
  EXPECT_FALSE(a.any_failure);
  const auto* final_vs_base = row(a, "optimized_fake", "vs baseline");
  ASSERT_NE(final_vs_base, nullptr);
  EXPECT_NEAR(final_vs_base->speedup, 2.0, 0.03);  // 10 us over 5 us
  EXPECT_EQ(final_vs_base->verdict, "FASTER");
  EXPECT_LT(final_vs_base->p, 0.001);
  EXPECT_LE(final_vs_base->ci_lo, final_vs_base->speedup);
  EXPECT_GE(final_vs_base->ci_hi, final_vs_base->speedup);
  const auto* vs_step = row(a, "optimized_fake", "vs previous step");
  ASSERT_NE(vs_step, nullptr);
  EXPECT_EQ(vs_step->against, "optimized_fake_step");
  EXPECT_NEAR(vs_step->speedup, 1.4, 0.03);
  const auto* vs_lib = row(a, "optimized_fake", "vs library");
  ASSERT_NE(vs_lib, nullptr);
  EXPECT_NEAR(vs_lib->speedup, 0.8, 0.02);  // 80% of the library
  EXPECT_EQ(vs_lib->verdict, "SLOWER");
  ASSERT_EQ(a.chapters.size(), 1u);
  EXPECT_NEAR(a.chapters[0].geomean, 2.0, 0.03);
  EXPECT_EQ(a.chapters[0].matched, 2);
  EXPECT_NE(progress_.find("[8/8] round 2/2 library_fake"), std::string::npos) << progress_;
}

// A ladder that branches: a step whose file names the step it changes (lab-after) is compared with
// that one in its "vs previous step" row, not with its neighbour in the list; one that names the
// baseline has no such row (its "vs baseline" row is that pair). A replay of the run's JSON pairs
// them the same way.
TEST_F(FakeLab, StepAfterNamesWhatItIsComparedWith) {
  const auto m = manifest({"baseline_fake", "optimized_fake_step", "optimized_fake_step2", "optimized_fake"}, {},
                          {{"optimized_fake_step2", "baseline_fake"}, {"optimized_fake", "optimized_fake_step"}});
  compare::RunOptions o;
  o.repetitions = 5;
  o.rounds = 1;
  const auto c = run(m, o);
  const compare::Meta meta = compare::make_meta(c, o, dir_.string(), "compare --chapter 1 --json f.json");
  const nlohmann::json saved = compare::to_json(c, compare::analyse(c, 7), meta);
  compare::Replayed back;
  compare::replay(compare::parse_run_file(saved.dump()), back);
  // A run saved before "after" was written: a replay takes it from the build's manifest.
  nlohmann::json older = saved;
  for (auto& p : older.at("programs")) p.erase("after");
  compare::Replayed old_back;
  compare::replay(older, old_back);
  compare::steps_after_from(manifest_, old_back);
  for (const auto& a :
       {compare::analyse(c, 7), compare::analyse(back.collected, 7), compare::analyse(old_back.collected, 7)}) {
    EXPECT_FALSE(a.any_failure);
    const auto* final_step = row(a, "optimized_fake", "vs previous step");
    ASSERT_NE(final_step, nullptr);
    EXPECT_EQ(final_step->against, "optimized_fake_step");  // named: 7 us to 5 us, not step 2's 6 to 5
    EXPECT_NEAR(final_step->speedup, 1.4, 0.03);
    EXPECT_EQ(row(a, "optimized_fake_step2", "vs previous step"), nullptr);  // it names the baseline
    const auto* step2_base = row(a, "optimized_fake_step2", "vs baseline");
    ASSERT_NE(step2_base, nullptr);
    EXPECT_NEAR(step2_base->speedup, 10.0 / 6.0, 0.03);
    EXPECT_EQ(row(a, "optimized_fake_step", "vs previous step"), nullptr);  // the first step
  }
  // The chapter's table of programs says it too.
  const auto md = dir_ / "programs.md";
  const auto r = compare::run_process(
      {COMPARE_BIN, "--manifest", m.string(), "--list", "--chapter", "1", "--markdown", md.string()}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string t = read(md);
  EXPECT_NE(t.find("| | `optimized_fake_step` | step 1 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| | `optimized_fake_step2` | step 2, after the baseline |"), std::string::npos) << t;
  EXPECT_NE(t.find("| | `optimized_fake` | optimized (final), after step 1 |"), std::string::npos) << t;
}

// compare writes the rounds so far after each finished round (main.cpp: FILE.unfinished), so a run
// cut short keeps what it measured: the callback sees every program with k rounds' samples after
// round k, for every round but the last, and a file written then says it is unfinished, in its line
// and its JSON (make_meta with the rounds done).
TEST_F(FakeLab, AfterEachRoundButTheLastWhatWasCollected) {
  const auto m = manifest({"baseline_fake", "optimized_fake"});
  compare::RunOptions o;
  o.repetitions = 3;
  o.rounds = 3;
  std::vector<int> rounds_seen;
  std::vector<std::size_t> samples_seen;
  nlohmann::json partial;
  const auto c = run(m, o, [&](const compare::Collected& got, int rounds_done) {
    rounds_seen.push_back(rounds_done);
    for (const auto& pr : got.programs) samples_seen.push_back(pr.shapes.at("128x256").samples.size());
    if (rounds_done == 1) {
      const compare::Meta meta =
          compare::make_meta(got, o, dir_.string(), "compare --chapter 1 --json f.json", rounds_done);
      partial = compare::to_json(got, compare::analyse(got, 7), meta);
    }
  });
  EXPECT_EQ(rounds_seen, (std::vector<int>{1, 2}));
  EXPECT_EQ(samples_seen, (std::vector<std::size_t>{3, 3, 6, 6}));  // two programs, 3 repetitions a round
  EXPECT_EQ(c.programs[1].shapes.at("128x256").samples.size(), 9u);

  ASSERT_FALSE(partial.is_null());
  EXPECT_EQ(partial.at("options").at("rounds"), 1);
  EXPECT_EQ(partial.at("options").at("rounds_planned"), 3);
  compare::Replayed back;
  compare::replay(partial, back);
  EXPECT_TRUE(back.meta.partial());
  EXPECT_NE(back.meta.line().find("UNFINISHED: 1 of the 3 rounds"), std::string::npos) << back.meta.line();

  compare::Meta whole = compare::make_meta(c, o, dir_.string(), "compare --chapter 1 --json f.json");
  EXPECT_FALSE(whole.partial());
  EXPECT_EQ(whole.line().find("UNFINISHED"), std::string::npos) << whole.line();
  EXPECT_FALSE(compare::to_json(c, compare::analyse(c, 7), whole).at("options").contains("rounds_planned"));
}

// A run cut short after its first round (the machine lost: no device from round 2 on) leaves the
// file it was to write as it was, and the round it finished beside it, marked unfinished.
TEST_F(FakeLab, ARunCutShortKeepsItsRoundsAndLeavesTheFileAsItWas) {
  const auto m = manifest({"baseline_fake", "optimized_fake_lost"});
  const auto j = dir_ / "r.json", md = dir_ / "r.md";
  std::ofstream(j) << "the previous run\n";
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--seed", "5",
                                       "--repetitions", "3", "--rounds", "3", "--json", j.string(), "--markdown",
                                       md.string()},
                                      60);
  EXPECT_EQ(r.exit_code, 3) << r.err;  // no usable device
  EXPECT_NE(r.err.find("compare: 1 of 3 rounds done"), std::string::npos) << r.err;
  EXPECT_EQ(read(j), "the previous run\n");
  EXPECT_FALSE(fs::exists(md));
  const auto js = nlohmann::json::parse(read(fs::path(j.string() + ".unfinished")));
  EXPECT_EQ(js["options"]["rounds"], 1);
  EXPECT_EQ(js["options"]["rounds_planned"], 3);
  EXPECT_EQ(js["programs"][1]["shapes"][0]["samples_s"].size(), 3u);  // round 1's 3 repetitions
  const std::string mdt = read(fs::path(md.string() + ".unfinished"));
  EXPECT_NE(mdt.substr(0, mdt.find('\n')).find("UNFINISHED: 1 of the 3 rounds"), std::string::npos) << mdt;
}

TEST(Agreement, RowByRowAgainstAPreviousRun) {
  compare::Analysis now;
  compare::Row a;
  a.variant = "optimized_x";
  a.kind = "vs baseline";
  a.against = "baseline_x";
  a.shape = "64";
  a.speedup = 4.0;
  a.ci_lo = 3.5;
  a.ci_hi = 4.6;
  a.verdict = "FASTER";
  a.bound = "GPU";
  compare::Row b = a;
  b.bound = "";
  b.shape = "128";
  b.speedup = 1.01;
  b.ci_lo = 0.99;
  b.ci_hi = 1.02;
  b.verdict = "SAME";
  compare::Row only_now = a;
  only_now.shape = "256";
  now.rows = {a, b, only_now};
  const nlohmann::json prev = {
      {"programs", nlohmann::json::array()},
      {"rows",
       {{{"variant", "optimized_x"}, {"kind", "vs baseline"}, {"against", "baseline_x"}, {"shape", "64"},
         {"speedup", 3.6}, {"verdict", "FASTER"}},
        {{"variant", "optimized_x"}, {"kind", "vs baseline"}, {"against", "baseline_x"}, {"shape", "128"},
         {"speedup", 1.03}, {"verdict", "FASTER"}}}}};
  const auto g = compare::row_agreement(prev.dump(), now);
  ASSERT_EQ(g.rows.size(), 2u);  // the 256 row has no partner
  EXPECT_EQ(g.verdicts_differ, 1);
  EXPECT_EQ(g.over_5pct, 1);
  ASSERT_NE(g.largest, nullptr);
  EXPECT_EQ(g.largest->shape, "64");
  EXPECT_NEAR(g.largest->diff_pct, 100.0 * (4.0 / 3.6 - 1.0), 1e-9);
  EXPECT_TRUE(g.largest->within_ci);  // 3.6 lies in [3.5, 4.6]
  EXPECT_FALSE(g.rows[1].within_ci);  // 1.03 is outside [0.99, 1.02]
  // The rule: the GPU-bound row is held to 5% (11% apart: disagrees), the row of unknown bound to
  // the intervals (no previous interval saved: the previous speedup must lie in this one's; it
  // does not: disagrees).
  EXPECT_EQ(g.rows[0].rule, "within 5%");
  EXPECT_FALSE(g.rows[0].agrees);
  EXPECT_EQ(g.rows[1].rule, "intervals overlap");
  EXPECT_FALSE(g.rows[1].agrees);
  EXPECT_EQ(g.gpu_rows, 1);
  EXPECT_EQ(g.host_rows, 1);
  EXPECT_FALSE(g.agrees());
  // 3% apart on a GPU-bound row agrees, even outside the interval; the same on a host-bound row
  // inside its interval agrees too.
  now.rows[0].speedup = 3.6 * 1.03;
  now.rows[0].ci_lo = 3.65, now.rows[0].ci_hi = 3.8;
  now.rows[1].ci_hi = 1.04;
  now.rows[1].bound = "host";
  const auto h = compare::row_agreement(prev.dump(), now);
  EXPECT_TRUE(h.rows[0].agrees);
  EXPECT_TRUE(h.rows[1].agrees);
  EXPECT_TRUE(h.agrees());
  // With the previous interval saved, a host-bound row agrees when the two intervals overlap.
  auto prev2 = prev;
  prev2["rows"][1]["ci95"] = {1.025, 1.05};  // overlaps [0.99, 1.04]
  EXPECT_TRUE(compare::row_agreement(prev2.dump(), now).rows[1].agrees);
  prev2["rows"][1]["ci95"] = {1.045, 1.05};  // does not
  EXPECT_FALSE(compare::row_agreement(prev2.dump(), now).rows[1].agrees);
  // When both runs carry a round-level interval, that one decides (not the bootstrap's).
  now.rows[1].round_lo = 0.97, now.rows[1].round_hi = 1.06;
  prev2["rows"][1]["round_ci95"] = {1.05, 1.09};  // overlaps [0.97, 1.06]; the ci95s do not
  const auto r1 = compare::row_agreement(prev2.dump(), now).rows[1];
  EXPECT_TRUE(r1.agrees);
  EXPECT_DOUBLE_EQ(r1.before_lo, 1.05);
  EXPECT_DOUBLE_EQ(r1.after_hi, 1.06);
  prev2["rows"][1]["round_ci95"] = {1.07, 1.09};  // does not overlap; the ci95s still do not
  EXPECT_FALSE(compare::row_agreement(prev2.dump(), now).rows[1].agrees);
  prev2["rows"][1]["round_ci95"] = {nullptr, nullptr};  // a one-round run: the bootstrap's again
  prev2["rows"][1]["ci95"] = {1.025, 1.05};
  EXPECT_TRUE(compare::row_agreement(prev2.dump(), now).rows[1].agrees);
  EXPECT_THROW(compare::row_agreement("not json", now), std::runtime_error);
}

TEST(Agreement, APreviousRunIsValidatedBeforeAnythingRuns) {
  EXPECT_THROW(compare::validate_previous_run("{\"rows\": [1,"), std::runtime_error);
  EXPECT_THROW(compare::validate_previous_run("[]"), std::runtime_error);
  EXPECT_THROW(compare::validate_previous_run("{\"rows\": []}"), std::runtime_error);
  EXPECT_THROW(compare::validate_previous_run("{\"rows\": [{}], \"programs\": []}"), std::runtime_error);
  EXPECT_NO_THROW(compare::validate_previous_run(
      "{\"rows\": [{\"variant\": \"v\", \"kind\": \"vs baseline\", \"shape\": \"8\"}], \"programs\": []}"));
}

TEST(Against, OneSlowProcessIsNotARegression) {
  compare::Program prog;
  prog.name = "baseline_x";
  auto cell = [](std::vector<double> round_level) {
    compare::Cell c;
    for (std::size_t r = 0; r < round_level.size(); ++r)
      for (int i = 0; i < 3; ++i) {
        c.samples.push_back(round_level[r] * (1.0 + 0.001 * i));
        c.rounds.push_back(static_cast<int>(r) + 1);
      }
    return c;
  };
  auto previous = [&](const compare::Cell& c) {
    return nlohmann::json{{"device", {{"uuid", "GPU-1"}}},
                          {"rows", nlohmann::json::array()},
                          {"programs", {{{"program", "baseline_x"},
                                         {"shapes", {{{"shape", "64"}, {"samples_s", c.samples}, {"rounds", c.rounds}}}}}}}}
        .dump();
  };
  compare::Collected now;
  now.context["lab_device_uuid"] = "GPU-1";
  compare::ProgramResult pr;
  pr.program = &prog;
  pr.shape_order = {"64"};
  pr.shapes["64"] = cell({1.16, 1.17, 1.15, 1.16});  // every process in the host's slow mode
  now.programs.push_back(pr);
  std::string error;
  // Before: two fast processes and two slow ones. The medians differ by 7%, but the rounds overlap.
  auto ch = compare::against(previous(cell({1.0, 1.16, 1.16, 1.0})), now, false, error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_LT(ch[0].ratio, 1 / 1.05);
  EXPECT_NE(ch[0].verdict, "REGRESSED");
  // Before: every process fast. Now every one is slower: a regression.
  ch = compare::against(previous(cell({1.0, 1.01, 0.99, 1.0})), now, false, error);
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].verdict, "REGRESSED");
}

TEST(Groups, SamplesGroupedByRound) {
  compare::Cell c;
  c.samples = {1, 2, 3, 4, 5};
  c.rounds = {1, 1, 2, 2, 2};
  const auto g = compare::sample_groups(c);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<double>{1, 2}));
  EXPECT_EQ(g[1], (std::vector<double>{3, 4, 5}));
  c.rounds.clear();  // a run saved before rounds were kept: one group
  EXPECT_EQ(compare::sample_groups(c).size(), 1u);
}

TEST_F(FakeLab, ListWritesAChaptersTableOfProgramsInRunOrder) {
  const auto m = manifest({"optimized_fake", "baseline_fake", "optimized_fake_step", "library_fake", "demo_fake"});
  const auto md = dir_ / "programs.md";
  const auto r = compare::run_process(
      {COMPARE_BIN, "--manifest", m.string(), "--list", "--chapter", "1", "--markdown", md.string()}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string t = read(md);
  EXPECT_EQ(t.rfind("Listed by `compare --list", 0), 0u) << t;  // the stamp update_readme_results.py asks for
  const auto at = [&](const std::string& s) { return t.find(s); };
  ASSERT_NE(at("| fake | `baseline_fake` | baseline |"), std::string::npos) << t;
  ASSERT_NE(at("| | `optimized_fake_step` | step 1 |"), std::string::npos) << t;
  ASSERT_NE(at("| | `optimized_fake` | optimized (final) |"), std::string::npos) << t;
  ASSERT_NE(at("| | `library_fake` | library |"), std::string::npos) << t;
  ASSERT_NE(at("| (demo) | `demo_fake` | demo |"), std::string::npos) << t;
  EXPECT_LT(at("`baseline_fake`"), at("`optimized_fake_step`"));
  EXPECT_LT(at("`optimized_fake_step`"), at("`optimized_fake` |"));
  EXPECT_LT(at("`optimized_fake` |"), at("`library_fake`"));
  // Half the request is a usage error.
  EXPECT_EQ(compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--list", "--markdown", md.string()}, 60)
                .exit_code,
            2);
}

TEST_F(FakeLab, AShapeAVariantDoesNotSupportIsNotApplicableNotAFailure) {
  const auto m = manifest({"baseline_six", "optimized_six_na"});
  const auto c = run(m);
  const auto a = compare::analyse(c, 7);
  EXPECT_FALSE(a.any_failure);  // N/A is what the variant declares, not something that went wrong
  const auto* ok = row(a, "optimized_six_na", "vs baseline", "64x64");
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->verdict, "FASTER");
  const auto* na = row(a, "optimized_six_na", "vs baseline", "128x256");
  ASSERT_NE(na, nullptr);
  EXPECT_EQ(na->verdict, "N/A");
  EXPECT_EQ(na->status, compare::Status::not_applicable);
  EXPECT_NE(na->message.find("written for 64x64 only"), std::string::npos) << na->message;
  EXPECT_EQ(na->message.find("[lab:"), std::string::npos) << na->message;  // the marker is not shown
  // The chapter's final speedup keeps the shape where the final variant ran.
  ASSERT_EQ(a.chapters.size(), 1u);
  EXPECT_EQ(a.chapters[0].matched, 1);
}

TEST_F(FakeLab, FailuresAreRowsNeverGaps) {
  const auto m = manifest({"baseline_fake", "optimized_fake_crash", "baseline_two", "optimized_two_wrong",
                           "baseline_three", "optimized_three_garbage", "baseline_four", "optimized_four_oom",
                           "baseline_five", "optimized_five"},
                          {"optimized_five"});
  const auto c = run(m);
  const auto a = compare::analyse(c, 7);
  EXPECT_TRUE(a.any_failure);
  const auto* crash = row(a, "optimized_fake_crash", "vs baseline");
  ASSERT_NE(crash, nullptr);
  EXPECT_EQ(crash->verdict, "CRASH");
  EXPECT_NE(crash->message.find("signal"), std::string::npos);
  const auto* wrong = row(a, "optimized_two_wrong", "vs baseline");
  ASSERT_NE(wrong, nullptr);
  EXPECT_EQ(wrong->verdict, "WRONG");
  EXPECT_NE(wrong->message.find("out[1, 2]: got 1, expected 2"), std::string::npos) << wrong->message;
  const auto* garbage = row(a, "optimized_three_garbage", "vs baseline");
  ASSERT_NE(garbage, nullptr);
  EXPECT_EQ(garbage->verdict, "BAD-OUTPUT");
  const auto* oom_ok = row(a, "optimized_four_oom", "vs baseline", "64x64");
  ASSERT_NE(oom_ok, nullptr);
  EXPECT_EQ(oom_ok->verdict, "FASTER");  // the shapes that fit are still measured
  const auto* oom = row(a, "optimized_four_oom", "vs baseline", "128x256");
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->verdict, "OOM");
  EXPECT_NE(oom->message.find("out of device memory"), std::string::npos) << oom->message;
  // Not built: its topic is unknown (it cannot describe itself), but it is a row all the same.
  const compare::Row* missing = nullptr;
  for (const auto& r : a.rows)
    if (r.variant == "optimized_five") missing = &r;
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->verdict, "NOT-BUILT");
  EXPECT_NE(missing->message.find("make optimized_five"), std::string::npos) << missing->message;
  // A failed program is not run again in later rounds.
  EXPECT_NE(progress_.find("optimized_fake_crash: CRASH, skipped"), std::string::npos) << progress_;
}

TEST_F(FakeLab, TimeoutIsARow) {
  const auto m = manifest({"baseline_fake", "optimized_fake_hang"});
  compare::RunOptions o;
  o.timeout_s = 1;
  o.rounds = 1;
  const auto a = compare::analyse(run(m, o), 7);
  const auto* r = row(a, "optimized_fake_hang", "vs baseline");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->verdict, "TIMEOUT");
}

TEST_F(FakeLab, NoGpuStopsTheRun) {
  const auto m = manifest({"baseline_fake_nogpu", "optimized_fake"});
  const auto c = run(m);
  EXPECT_TRUE(c.no_gpu);
  EXPECT_NE(c.no_gpu_message.find("no usable CUDA device"), std::string::npos);
  EXPECT_EQ(progress_.find("optimized_fake:"), std::string::npos);  // never started
}

TEST_F(FakeLab, ProgramArguments) {
  const auto m = manifest({"baseline_fake"});
  manifest_ = described(m);
  const auto& p = manifest_.programs[0];
  ASSERT_TRUE(p.built);
  EXPECT_EQ(p.sweep, (std::vector<std::string>{"64x64", "128x256"}));
  compare::RunOptions o;
  o.seed = 99;
  o.quick = true;
  o.repetitions = 4;
  auto a1 = compare::program_args(p, o, 1);
  auto has = [](const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  EXPECT_TRUE(has(a1, "99"));
  EXPECT_TRUE(has(a1, "--benchmark_format=json"));
  EXPECT_TRUE(has(a1, "--benchmark_repetitions=4"));
  EXPECT_TRUE(has(a1, "64x64"));  // quick: the smallest sweep shape
  EXPECT_FALSE(has(a1, "128x256"));
  EXPECT_FALSE(has(a1, "--no-check"));  // round 1 verifies
  EXPECT_TRUE(has(compare::program_args(p, o, 2), "--no-check"));
}

TEST_F(FakeLab, UnknownChapterNamesWhatExists) {
  const auto m = manifest({"baseline_fake", "optimized_fake"});
  auto man = described(m);
  compare::Selection s;
  s.chapter = "7";
  try {
    compare::select_programs(man, s);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ch01_basics"), std::string::npos) << e.what();
  }
  s.chapter = "ch01_basics";
  EXPECT_EQ(compare::select_programs(man, s).size(), 2u);
  s.chapter = "ch01";
  EXPECT_EQ(compare::select_programs(man, s).size(), 2u);
}

// --topic among programs some of which are not built: their topics cannot be known, and the error
// says so and how to build them, where it listed the built ones' topics alone (none at all on a
// fresh build folder: "topics:").
TEST_F(FakeLab, UnknownTopicSaysWhichProgramsAreNotBuilt) {
  const auto m = manifest({"baseline_fake", "optimized_fake"}, {"optimized_fake"});
  auto man = described(m);
  compare::Selection s;
  s.chapter = "1";
  s.topic = "nosuch";
  try {
    compare::select_programs(man, s);
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("topics in ch01_basics: fake; 1 program whose topic is unknown, optimized_fake: not built: run `make "
                        "optimized_fake` (or `make ch01`)"),
              std::string::npos)
        << what;
  }
  const auto none = manifest({"baseline_none", "optimized_none"}, {"baseline_none", "optimized_none"});
  man = described(none);
  try {
    compare::select_programs(man, s);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("topics in ch01_basics: none known; 2 programs whose topic is unknown, baseline_none: not built"),
              std::string::npos)
        << e.what();
  }
}

// With --chapter, the topics the error lists are that chapter's, and a --topic that another
// chapter has is said to be there; without it, every chapter's.
TEST_F(FakeLab, UnknownTopicListsTheChaptersTopics) {
  const auto m = manifest({"baseline_fake", "optimized_fake"});
  auto man = described(m);
  man.programs[1].folder = "ch02_profiling", man.programs[1].chapter = 2, man.programs[1].topic = "other";
  man.programs[1].source = "ch02_profiling/optimized_fake.cu";
  // What selecting throws ("" when it selects a program).
  auto error_of = [&](const compare::Selection& s) -> std::string {
    try {
      compare::select_programs(man, s);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  compare::Selection s;
  s.chapter = "1";
  s.topic = "other";
  const std::string other = error_of(s);
  EXPECT_NE(other.find("topics in ch01_basics: fake; --topic other is in ch02_profiling)"), std::string::npos)
      << "--chapter 1 --topic other: '" << other << "'";
  s.chapter.reset();
  s.topic = "nosuch";
  const std::string nosuch = error_of(s);
  EXPECT_NE(nosuch.find("topics: fake other)"), std::string::npos) << "--topic nosuch: '" << nosuch << "'";
  s.topic = "other";
  ASSERT_EQ(compare::select_programs(man, s).size(), 1u);
}

// --shape is judged by a built program of the topic; one not built is passed over (the run reports
// it NOT-BUILT), where its path's "No such file" was the error.
TEST_F(FakeLab, ShapesAreJudgedByABuiltProgram) {
  const auto m = manifest({"baseline_fake", "optimized_fake"}, {"baseline_fake"});
  auto man = described(m);
  compare::Selection s;
  s.chapter = "1";
  const auto programs = compare::select_programs(man, s);
  std::string refused;
  EXPECT_TRUE(compare::shapes_refused(programs, {"64x64"}, 10, refused)) << refused;
  EXPECT_FALSE(compare::shapes_refused(programs, {"64"}, 10, refused));
  EXPECT_NE(refused.find("(optimized_fake): --shape 64: expected 2 positive integers"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("No such file"), std::string::npos) << refused;
}

// A program whose --describe fails: its error says why without its name, which every place that
// prints the error puts beside it (the list, a NOT-BUILT row, compare's "none can run").
TEST_F(FakeLab, DescribeFailureNamesTheProgramOnce) {
  const auto m = manifest({"baseline_fake"});
  fs::remove(dir_ / "ch01_basics" / "baseline_fake");
  fs::create_symlink("/bin/false", dir_ / "ch01_basics" / "baseline_fake");
  const auto man = described(m);
  ASSERT_FALSE(man.programs[0].built);
  EXPECT_EQ(man.programs[0].describe_error, "--describe failed (exit status 1)");
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("(baseline_fake: --describe failed (exit status 1))"), std::string::npos) << r.err;
}

TEST_F(FakeLab, SubfolderSelectsTheProgramsUnderIt) {
  const auto m = manifest({"baseline_fake", "optimized_fake"});
  auto man = described(m);
  man.programs[1].source = "ch01_basics/ladder/01_optimized_fake.cu";  // a program in a subfolder
  compare::Selection s;
  s.chapter = "1";
  s.subfolder = "ladder";
  auto picked = compare::select_programs(man, s);
  ASSERT_EQ(picked.size(), 1u);
  EXPECT_EQ(picked[0]->name, "optimized_fake");
  s.subfolder = "ladder/";  // a trailing slash names the same folder
  EXPECT_EQ(compare::select_programs(man, s).size(), 1u);
  s.subfolder = "ladde";  // a prefix of a folder's name is not that folder, and the error names the folders there are
  try {
    compare::select_programs(man, s);
    ADD_FAILURE() << "--subfolder ladde selected a program";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("subfolders: ladder"), std::string::npos) << e.what();
  }
  man.programs[1].source = "ch01_basics/ladder/deep/01_optimized_fake.cu";  // and the folders above a program's
  try {
    compare::select_programs(man, s);
    ADD_FAILURE() << "--subfolder ladde selected a program";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("subfolders: ladder ladder/deep)"), std::string::npos) << e.what();
  }
  s.subfolder = "ladder";
  EXPECT_EQ(compare::select_programs(man, s).size(), 1u);
  man.programs[1].source = "ch01_basics/ladder/01_optimized_fake.cu";
  const std::string table = compare::programs_markdown(picked, "compare --list --chapter N --subfolder ladder --markdown FILE");
  EXPECT_NE(table.find("--subfolder ladder"), std::string::npos) << table;
  EXPECT_NE(table.find("`optimized_fake`"), std::string::npos) << table;
  EXPECT_EQ(table.find("`baseline_fake`"), std::string::npos) << table;
}

// --- the command line, end to end ----------------------------------------------------------

TEST_F(FakeLab, CommandLineWritesEveryOutput) {
  const auto m = manifest({"baseline_fake", "optimized_fake"});
  const auto j = dir_ / "r.json", c = dir_ / "r.csv", md = dir_ / "r.md";
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--seed", "5",
                                       "--repetitions", "5", "--json", j.string(), "--csv", c.string(),
                                       "--markdown", md.string()},
                                      60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("FASTER"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Fake GPU"), std::string::npos);
  EXPECT_EQ(r.out.find("\033["), std::string::npos);  // no color into a pipe
  EXPECT_NE(r.err.find("[8/8] round 4/4 optimized_fake"), std::string::npos) << r.err;  // 4 rounds by default
  // The rounds so far beside the files after each round but the last, then the files, and those gone.
  EXPECT_NE(r.err.find("compare: 3 of 4 rounds done, kept in the files asked for with .unfinished"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("compare: 4 of 4 rounds done"), std::string::npos) << r.err;
  for (const auto& f : {j, c, md}) EXPECT_FALSE(fs::exists(f.string() + ".unfinished")) << f;
  const auto js = nlohmann::json::parse(read(j));
  EXPECT_FALSE(js["options"].contains("rounds_planned")) << js["options"];
  EXPECT_EQ(js["device"]["name"], "Fake GPU");
  const auto& shape0 = js["programs"][1]["shapes"][0];
  EXPECT_EQ(shape0["samples_s"].size(), 20u);  // 5 repetitions x 4 rounds
  ASSERT_EQ(shape0["rounds"].size(), 20u);     // the round of every sample, for the grouped bootstrap
  EXPECT_EQ(shape0["rounds"][0], 1);
  EXPECT_EQ(shape0["rounds"][19], 4);
  EXPECT_EQ(js["rows"][0]["verdict"], "FASTER");
  // The round-level interval of 4 rounds: saved, and around the speedup.
  const auto& rci = js["rows"][0]["round_ci95"];
  ASSERT_TRUE(rci[0].is_number() && rci[1].is_number()) << rci;
  EXPECT_LE(rci[0].get<double>(), js["rows"][0]["speedup"].get<double>() * 1.05);
  EXPECT_GE(rci[1].get<double>(), js["rows"][0]["speedup"].get<double>() / 1.05);
  EXPECT_FALSE(js["git_commit"].get<std::string>().empty());
  const std::string csv = read(c);
  EXPECT_EQ(csv.rfind("chapter,topic,shape,variant", 0), 0u);
  EXPECT_NE(csv.find("Fake GPU"), std::string::npos);
  const std::string mdt = read(md);
  EXPECT_NE(mdt.find("| fake | 64x64 | `optimized_fake` |"), std::string::npos) << mdt;
  EXPECT_NE(mdt.find("driver 13.0"), std::string::npos);
  EXPECT_EQ(mdt.find("UNFINISHED"), std::string::npos) << mdt;

  // Against itself: nothing regressed. Against another device: refused.
  const auto again = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--against",
                                           j.string()},
                                          60);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("against the previous run"), std::string::npos);
  EXPECT_EQ(again.out.find("REGRESSED"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("agreement with the previous run"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("2 rows in both runs;"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("same verdict: 2;"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("the runs agree"), std::string::npos) << again.out;
  // Two saved runs judged against each other, nothing run: the same rule.
  const auto saved = compare::run_process({COMPARE_BIN, "--replay", j.string(), "--against", j.string()}, 60);
  EXPECT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_NE(saved.out.find("2 rows in both runs;"), std::string::npos) << saved.out;
  EXPECT_NE(saved.out.find("the runs agree"), std::string::npos) << saved.out;
  EXPECT_EQ(saved.err.find("round 1/"), std::string::npos) << saved.err;
  // A corrupt previous run is refused before anything runs (exit 2, the file named).
  std::ofstream(dir_ / "corrupt.json") << "{\"rows\": [";
  const auto corrupt = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--against",
                                             (dir_ / "corrupt.json").string()},
                                            60);
  EXPECT_EQ(corrupt.exit_code, 2);
  EXPECT_NE(corrupt.err.find("corrupt.json"), std::string::npos) << corrupt.err;
  EXPECT_EQ(corrupt.err.find("round 1/"), std::string::npos) << corrupt.err;  // nothing ran
  auto other = js;
  other["device"]["uuid"] = "GPU-other";
  std::ofstream(dir_ / "other.json") << other.dump();
  const auto refused = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--against",
                                             (dir_ / "other.json").string()},
                                            60);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--ignore-device"), std::string::npos) << refused.err;
  // It stops at the first program that reports the device, not after the whole run.
  EXPECT_NE(refused.err.find("[1/"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("[2/"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("stopped after the first program"), std::string::npos) << refused.err;
  const auto ignored = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--against",
                                             (dir_ / "other.json").string(), "--ignore-device"},
                                            60);
  EXPECT_EQ(ignored.exit_code, 0) << ignored.err;
  EXPECT_NE(ignored.out.find("the runs agree"), std::string::npos) << ignored.out;
}

TEST_F(FakeLab, DemosAreListedNotRun) {
  const auto m = manifest({"baseline_fake", "optimized_fake", "demo_fake"});
  const auto listed = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--list"}, 60);
  EXPECT_EQ(listed.exit_code, 0);
  EXPECT_NE(listed.out.find("demo_fake  [demo]"), std::string::npos) << listed.out;
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("compare: note: demo_fake is a demo, not a pair; run it directly"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(" demo_fake:"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("optimized_fake"), std::string::npos);
}

TEST_F(FakeLab, ReplayRendersTheSameResults) {
  const auto m = manifest({"baseline_fake", "optimized_fake_step", "optimized_fake"});
  const auto j = dir_ / "r.json", md = dir_ / "r.md", md2 = dir_ / "r2.md", csv1 = dir_ / "r.csv", csv2 = dir_ / "r2.csv";
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--json", j.string(),
                                       "--markdown", md.string(), "--csv", csv1.string()},
                                      60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto again = compare::run_process(
      {COMPARE_BIN, "--replay", j.string(), "--markdown", md2.string(), "--csv", csv2.string()}, 60);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read(md2), read(md));  // same rows, same intervals (the seed is in the file), same counters
  EXPECT_EQ(read(csv2), read(csv1));
  EXPECT_NE(read(md).find("| `optimized_fake` | 64x64 |"), std::string::npos);
  EXPECT_NE(read(md).find("GB/s"), std::string::npos);
  std::ofstream(dir_ / "bad.json") << R"({"tool": "cuda-perf-lab compare", "programs": 3})";
  EXPECT_EQ(compare::run_process({COMPARE_BIN, "--replay", (dir_ / "bad.json").string()}, 60).exit_code, 2);
  EXPECT_EQ(compare::run_process({COMPARE_BIN, "--replay", j.string(), "--chapter", "1"}, 60).exit_code, 2);
}

TEST_F(FakeLab, ReplayMergesRunsOfOneDevice) {
  const auto m = manifest({"baseline_fake", "optimized_fake"});
  const auto a = dir_ / "a.json", b = dir_ / "b.json", ab = dir_ / "ab.json", md = dir_ / "ab.md", both = dir_ / "both.md";
  auto run_at = [&](const std::string& shape, const fs::path& j, const fs::path* markdown = nullptr) {
    std::vector<std::string> args = {COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--shape", shape,
                                     "--seed", "5", "--json", j.string()};
    if (markdown) args.insert(args.end(), {"--markdown", markdown->string()});
    return compare::run_process(args, 60);
  };
  ASSERT_EQ(run_at("64x64", a).exit_code, 0);
  ASSERT_EQ(run_at("128x256", b).exit_code, 0);
  const auto merged = compare::run_process(
      {COMPARE_BIN, "--replay", a.string(), "--replay", b.string(), "--markdown", md.string(), "--json", ab.string()}, 60);
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  const std::string text = read(md);
  EXPECT_NE(text.find("| fake | 64x64 | `optimized_fake` |"), std::string::npos) << text;
  EXPECT_NE(text.find("| fake | 128x256 | `optimized_fake` |"), std::string::npos) << text;
  // one run of both shapes renders the same rows as the two runs merged (the samples are the fake's)
  ASSERT_EQ(compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--shape", "64x64", "--shape",
                                  "128x256", "--seed", "5", "--markdown", both.string()},
                                 60)
                .exit_code,
            0);
  const auto rows = [](const std::string& t) { return t.substr(t.find("\n| topic")); };
  EXPECT_EQ(rows(text), rows(read(both)));
  // the merged JSON names both commands; replayed alone it gives the same table
  const auto j = nlohmann::json::parse(read(ab));
  EXPECT_NE(j.at("command").get<std::string>().find(" and "), std::string::npos) << j.at("command");
  const auto again = compare::run_process({COMPARE_BIN, "--replay", ab.string(), "--markdown", both.string()}, 60);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read(both), text);
  // refused: a program at a shape twice, another device, other samples; nothing written
  auto refused = [&](const std::vector<std::string>& files, const std::string& why) {
    std::vector<std::string> args = {COMPARE_BIN};
    for (const auto& f : files) args.insert(args.end(), {"--replay", f});
    const auto r = compare::run_process(args, 60);
    EXPECT_EQ(r.exit_code, 2) << why;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  };
  refused({a.string(), a.string()}, "at 64x64 is in");
  auto other = nlohmann::json::parse(read(b));
  other["device"]["uuid"] = "GPU-other";
  std::ofstream(dir_ / "other.json") << other.dump();
  refused({a.string(), (dir_ / "other.json").string()}, "runs of one device only");
  auto fewer = nlohmann::json::parse(read(b));
  fewer["options"]["rounds"] = 1;
  std::ofstream(dir_ / "fewer.json") << fewer.dump();
  refused({a.string(), (dir_ / "fewer.json").string()}, "merge runs of the same samples only");
  refused({a.string(), (dir_ / "missing.json").string()}, "missing.json: cannot read it");
}

TEST_F(FakeLab, CommandLineStatuses) {
  const auto m = manifest({"baseline_fake", "optimized_fake_wrong"});
  auto run_cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {COMPARE_BIN, "--manifest", m.string()});
    return compare::run_process(args, 60);
  };
  EXPECT_EQ(run_cli({"--chapter", "1"}).exit_code, 1);  // a WRONG row
  const auto listed = run_cli({"--list"});
  EXPECT_EQ(listed.exit_code, 0);
  EXPECT_NE(listed.out.find("optimized_fake_wrong  [optimized]"), std::string::npos) << listed.out;
  EXPECT_EQ(run_cli({}).exit_code, 2);
  EXPECT_EQ(run_cli({"--chapter", "9"}).exit_code, 2);
  EXPECT_EQ(run_cli({"--chapter", "1", "--cache", "warm"}).exit_code, 2);
  EXPECT_EQ(run_cli({"--bogus"}).exit_code, 2);
  EXPECT_EQ(compare::run_process({COMPARE_BIN, "--manifest", (dir_ / "none.json").string(), "--all"}, 60).exit_code, 2);
  const auto nogpu = manifest({"baseline_x_nogpu"});
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", nogpu.string(), "--all"}, 60);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("no usable CUDA device"), std::string::npos) << r.err;
}

// None of the programs selected built: exit 2 before anything runs, saying how to build, and a
// results file asked for is left as it was (a run of NOT-BUILT rows wrote an empty table over it).
// Some built: the run goes on, the others' rows NOT-BUILT.
TEST_F(FakeLab, CommandLineWithNothingBuiltWritesNothing) {
  const auto m = manifest({"baseline_fake", "optimized_fake"}, {"baseline_fake", "optimized_fake"});
  const auto j = dir_ / "kept.json";
  std::ofstream(j) << "{\"earlier\": true}\n";
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--json", j.string()}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("compare: error: none of the 2 programs selected can run (baseline_fake: not built: run `make "
                       "baseline_fake` (or `make ch01`)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("round 1/"), std::string::npos) << r.err;
  EXPECT_EQ(read(j), "{\"earlier\": true}\n");
  // A bad value of the command line is named first, not hidden behind the build.
  const auto bad = compare::run_process(
      {COMPARE_BIN, "--manifest", m.string(), "--chapter", "1", "--against", (dir_ / "none.json").string()}, 60);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--against"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("none of the"), std::string::npos) << bad.err;
  const auto some = manifest({"baseline_half", "optimized_half"}, {"optimized_half"});
  const auto s = compare::run_process({COMPARE_BIN, "--manifest", some.string(), "--chapter", "1", "--rounds", "1"}, 60);
  EXPECT_NE(s.err.find("optimized_half: NOT-BUILT, skipped"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("baseline_half"), std::string::npos) << s.err;
}

// Bad values are refused as the command line is read: exit 2, one line naming the flag and why,
// and no program started (nothing in the progress lines).
TEST_F(FakeLab, CommandLineRefusesBadValuesBeforeRunningAnything) {
  const auto m = manifest({"baseline_fake", "optimized_fake", "demo_fake"});
  auto run_cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {COMPARE_BIN, "--manifest", m.string()});
    return compare::run_process(args, 60);
  };
  auto refused = [&](std::vector<std::string> args, const std::string& why) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << "\n" << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("round 1/"), std::string::npos) << "a program ran: " << r.err;
    const auto lines = std::count(r.err.begin(), r.err.end(), '\n');
    EXPECT_LE(lines, 2) << r.err;  // one line (and at most a note)
  };
  refused({"--chapter", "1", "--seed", "-1"}, "--seed: -1: not a whole number");
  refused({"--chapter", "1", "--seed", ""}, "--seed: '': empty");
  refused({"--chapter", "1", "--seed", "18446744073709551616"}, "above 18446744073709551615");
  refused({"--chapter", "1", "--timeout", "0"}, "--timeout: a number of seconds above 0");
  refused({"--chapter", "1", "--json", (dir_ / "no" / "r.json").string()}, "does not exist");
  refused({"--chapter", "1", "--csv", dir_.string()}, "a folder, not a file");
  refused({"--chapter", "1", "--markdown", "/nonexistent/r.md"}, "the folder /nonexistent does not exist");
  refused({"--chapter", "1", "--shape", "0x0"}, "--shape, for topic fake (baseline_fake): --shape 0x0");
  refused({"--chapter", "1", "--shape", "64x64", "--shape", "5"}, "--shape 5: expected 2 positive integers");
  // The 300-digit number CLI11's own range check printed is gone.
  EXPECT_EQ(run_cli({"--chapter", "1", "--timeout", "0"}).err.find("000000000000"), std::string::npos);
  // A good shape runs (and the demo is a note, said as one).
  const auto ok = run_cli({"--chapter", "1", "--shape", "64x64", "--repetitions", "3", "--rounds", "1"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.err.find("compare: note: demo_fake is a demo"), std::string::npos) << ok.err;
  // An existing output file is left as it was by a run refused at once.
  const auto kept = dir_ / "kept.json";
  std::ofstream(kept) << "earlier results";
  EXPECT_EQ(run_cli({"--chapter", "1", "--json", kept.string(), "--shape", "0x0"}).exit_code, 2);
  EXPECT_EQ(read(kept), "earlier results");
}

TEST_F(FakeLab, ListOfAChapterPrintsItsTableOrNamesTheMissingChapter) {
  const auto m = manifest({"baseline_fake", "optimized_fake"});
  const auto r = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--list", "--chapter", "1"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| fake | `baseline_fake` | baseline |"), std::string::npos) << r.out;
  const auto nine = compare::run_process({COMPARE_BIN, "--manifest", m.string(), "--list", "--chapter", "9"}, 60);
  EXPECT_EQ(nine.exit_code, 2);
  EXPECT_NE(nine.err.find("no chapter 9 (chapters: ch01_basics)"), std::string::npos) << nine.err;
}

}  // namespace
