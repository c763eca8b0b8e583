// The shared main's flags and exit statuses, without a GPU.
#include "lab/harness.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_topic.hpp"
#include "lab/check.hpp"
#include "lab/demo.hpp"
#include "lab/testing.hpp"

namespace {

const lab::Variant& fake_variant() {
  static lab::Registry reg;
  static const lab::Variant* v =
      &lab::register_variant<FakeTopic>(reg, "optimized_fake", lab::Role::optimized, lab::kFinalStep, "does nothing", &fake_run);
  return *v;
}

lab::Options parse(std::vector<std::string> args) { return lab::parse_options(fake_variant(), args); }

int run(std::vector<std::string> args) {
  args.insert(args.begin(), "optimized_fake");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return lab::run_main(fake_variant(), static_cast<int>(argv.size()), argv.data());
}

TEST(Options, Defaults) {
  const auto o = parse({});
  EXPECT_FALSE(o.help || o.describe || o.check_only || o.no_check || o.remeasure_peaks);
  EXPECT_TRUE(o.shapes.empty());
  EXPECT_EQ(o.cache, lab::CacheMode::cold);
  EXPECT_FALSE(o.seed.has_value());
  EXPECT_TRUE(o.benchmark_args.empty());
  EXPECT_FALSE(o.machine_readable);
}

TEST(Options, ShapesRepeatedAndCommaSeparated) {
  const auto o = parse({"--shape", "3x4,5x6", "--shape", "7x8"});
  EXPECT_EQ(o.shapes, (std::vector<lab::Shape>{{3, 4}, {5, 6}, {7, 8}}));
}

TEST(Options, Flags) {
  const auto o = parse({"--cache", "hot", "--seed", "123", "--check-only", "--remeasure-peaks"});
  EXPECT_EQ(o.cache, lab::CacheMode::hot);
  EXPECT_EQ(o.seed.value(), 123u);
  EXPECT_TRUE(o.check_only);
  EXPECT_TRUE(o.remeasure_peaks);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"--describe"}).describe);
}

TEST(Options, BenchmarkFlagsPassThrough) {
  const auto o = parse({"--benchmark_repetitions=3", "--benchmark_format=json", "--shape", "8x8"});
  EXPECT_EQ(o.benchmark_args, (std::vector<std::string>{"--benchmark_repetitions=3", "--benchmark_format=json"}));
  EXPECT_TRUE(o.machine_readable);
}

TEST(Options, BadInputIsAUsageError) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--bogus"}, {"stray"}, {"--cache", "warm"}, {"--shape", "0x4"}, {"--shape", "4"}, {"--shape", "4x2000"},
           {"--seed", "abc"}, {"--seed", "-1"}, {"--seed=-1"}, {"--seed", "18446744073709551616"}, {"--seed", "1e3"},
           {"--check-only", "--no-check"}, {"--shape"}}) {
    EXPECT_THROW(parse(args), lab::UsageError) << args.front();
  }
}

TEST(Options, TopicLimitsAreNamed) {
  try {
    parse({"--shape", "4x2000"});
    FAIL();
  } catch (const lab::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 1000 columns"), std::string::npos) << e.what();
  }
}

TEST(Options, HelpListsFlagsShapesAndExitStatuses) {
  const std::string h = lab::help_text(fake_variant());
  for (const char* s : {"--shape", "--cache", "--check-only", "--skip-check-set", "--no-check", "--seed", "--describe",
                        "--benchmark_repetitions", "64x64 128x256", "Exit status"})
    EXPECT_NE(h.find(s), std::string::npos) << s;
}

TEST(Options, DescribeIsJsonWithWork) {
  const auto j = nlohmann::json::parse(lab::describe_json(fake_variant()));
  EXPECT_EQ(j["program"], "optimized_fake");
  EXPECT_EQ(j["topic"], "fake");
  EXPECT_EQ(j["role"], "optimized");
  EXPECT_EQ(j["chapter"], 1);
  EXPECT_EQ(j["sweep"][1]["shape"], "128x256");
  EXPECT_DOUBLE_EQ(j["sweep"][1]["bytes"].get<double>(), 8.0 * 128 * 256);
  EXPECT_EQ(j["checks"].size(), 2u);
}

TEST(Options, VerifiedShapesIncludeSmallTimedOnes) {
  const auto& t = *fake_variant().topic;
  const auto s = lab::shapes_to_verify(t, {{64, 64}, {3, 5}, {20000, 20000}, {7, 9}});
  // 20000^2 * 8 B is over the cost limit; the topic says 7x9 cannot be verified.
  EXPECT_EQ(s, (std::vector<lab::Shape>{{1, 1}, {3, 5}, {64, 64}}));
}

// A topic whose CPU reference does more than the kernels' work (a check that trains again and
// again, as ch01's MLP check) says so with reference_work(), and the cost limits bound that: a
// timed shape whose work is cheap but whose reference is not is not verified; the check shapes
// are, whatever their cost; without reference_work() the limits bound work().
struct CostlyReferenceTopic : FakeTopic {
  static lab::Work reference_work(const lab::Shape& s) {
    return {.bytes = 8.0 * s[0] * s[1], .flops = 1e8 * double(s[0]) * s[1]};
  }
  static std::vector<lab::Shape> checks() { return {{1, 1}, {10, 10}}; }  // 1e10 reference FLOPs: over, checked all the same
};
TEST(Options, TheLimitsBoundTheReferencesOwnCostWhereTheTopicStatesIt) {
  const lab::TopicInfo costly = lab::topic_info<CostlyReferenceTopic>(), plain = lab::topic_info<FakeTopic>();
  EXPECT_DOUBLE_EQ(plain.reference_work({64, 64}).flops, plain.work({64, 64}).flops);
  EXPECT_DOUBLE_EQ(costly.reference_work({64, 64}).flops, 1e8 * 64 * 64);
  EXPECT_TRUE(lab::reference_can_verify(plain, {64, 64}));
  EXPECT_FALSE(lab::reference_can_verify(costly, {64, 64}));  // 4.1e11 reference FLOPs, 8192 of work
  EXPECT_TRUE(lab::reference_can_verify(costly, {5, 8}));     // 4e9: at the limit
  EXPECT_FALSE(lab::reference_can_verify(costly, {7, 5}));    // cheap, but the topic's own verifiable() says no
  EXPECT_EQ(lab::shapes_to_verify(costly, {{64, 64}, {5, 8}, {2, 3}}),
            (std::vector<lab::Shape>{{1, 1}, {10, 10}, {5, 8}, {2, 3}}));
  EXPECT_EQ(lab::shapes_to_verify(plain, {{64, 64}, {5, 8}}), (std::vector<lab::Shape>{{1, 1}, {3, 5}, {64, 64}, {5, 8}}));
}

// --skip-check-set: the --shape shapes alone, so that the fuzz's reproduce line checks one shape
// instead of the check set as well (a GPT-2 step's 11 shapes take about 100 s on the H100).
TEST(Options, SkipCheckSetVerifiesTheGivenShapesAlone) {
  const auto& t = *fake_variant().topic;
  EXPECT_EQ(lab::shapes_to_verify(t, {{64, 64}, {20000, 20000}, {7, 9}, {1, 1}}, false),
            (std::vector<lab::Shape>{{64, 64}, {1, 1}}));
  const auto o = parse({"--check-only", "--skip-check-set", "--shape", "64x64"});
  EXPECT_TRUE(o.skip_check_set);
  EXPECT_FALSE(parse({"--check-only", "--shape", "64x64"}).skip_check_set);
}

TEST(Options, SkipCheckSetNeedsCheckOnlyAndAShapeItCanVerify) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--skip-check-set", "--shape", "64x64"}, "--check-only"},  // a timed run verifies the check set first
      {{"--check-only", "--skip-check-set"}, "--shape"},
      {{"--check-only", "--skip-check-set", "--shape", "7x9"}, "none of the --shape shapes can be verified"},
      {{"--check-only", "--skip-check-set", "--shape", "2000000x1000"}, "none of the --shape shapes can be verified"}};
  for (const auto& [args, says] : cases) {
    try {
      parse(args);
      ADD_FAILURE() << "accepted: " << args.back();
    } catch (const lab::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(run(args), lab::kExitUsage) << args.back();
  }
}

TEST(ExitStatus, UsageHelpAndDescribe) {
  EXPECT_EQ(run({"--bogus"}), lab::kExitUsage);
  EXPECT_EQ(run({"--shape", "1x2x3"}), lab::kExitUsage);
  EXPECT_EQ(run({"--cache", "lukewarm"}), lab::kExitUsage);
  EXPECT_EQ(run({"--help"}), lab::kExitOk);
  EXPECT_EQ(run({"--describe"}), lab::kExitOk);
}

TEST(ExitStatus, NoDeviceIsThree) {
  if (lab::testing::gpu_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present: exit 3 cannot be observed";
  EXPECT_EQ(run({"--check-only"}), lab::kExitNoDevice);
}

}  // namespace

TEST(Options, SeedTakesTheWholeUnsignedRange) {
  EXPECT_EQ(lab::parse_seed("0"), 0u);
  EXPECT_EQ(lab::parse_seed("18446744073709551615"), UINT64_MAX);
  EXPECT_THROW(lab::parse_seed(""), lab::UsageError);
  try {
    lab::parse_seed("-1");
    FAIL();
  } catch (const lab::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--seed -1"), std::string::npos) << e.what();
  }
}

namespace {

// The message of the UsageError that parsing `args` throws ("" when it throws none).
std::string usage_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const lab::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Options, GoogleBenchmarkValuesItWouldTakeBadlyAreRefusedFirst) {
  // Google Benchmark prints its usage and exits 0 on a format it does not write, aborts on a
  // negative repetition count and runs nothing on 0: the lab refuses them itself, naming the flag.
  EXPECT_NE(usage_error({"--benchmark_format=xml"}).find("--benchmark_format=xml"), std::string::npos);
  EXPECT_NE(usage_error({"--benchmark_out_format=xml"}).find("--benchmark_out_format=xml"), std::string::npos);
  for (const char* bad : {"--benchmark_repetitions=0", "--benchmark_repetitions=-1", "--benchmark_repetitions=",
                          "--benchmark_repetitions=2x", "--benchmark_repetitions=99999999999"})
    EXPECT_NE(usage_error({bad}).find("--benchmark_repetitions"), std::string::npos) << bad;
  for (const char* good : {"--benchmark_format=console", "--benchmark_format=csv", "--benchmark_out_format=json",
                           "--benchmark_repetitions=1", "--benchmark_repetitions=25"})
    EXPECT_EQ(usage_error({good}), "") << good;
}

TEST(Options, OutputFilesAreCheckedBeforeAnyWorkAndLeftAlone) {
  const auto dir = std::filesystem::temp_directory_path() / ("lab_options_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string kept = (dir / "kept.json").string();
  std::ofstream(kept) << "earlier results";
  EXPECT_NE(usage_error({"--benchmark_out=/nonexistent/x.json"}).find("/nonexistent does not exist"), std::string::npos);
  EXPECT_NE(usage_error({"--trace", ""}).find("--trace ''"), std::string::npos);
  EXPECT_NE(usage_error({"--trace", "/nonexistent/t.json"}).find("--trace"), std::string::npos);
  EXPECT_NE(usage_error({"--trace", dir.string()}).find("a folder, not a file"), std::string::npos);
  // A good path passes and is not touched by the check, nor by a run that stops at once.
  EXPECT_EQ(usage_error({"--trace", kept, "--benchmark_out=" + kept}), "");
  EXPECT_EQ(run({"--trace", kept, "--benchmark_out=" + kept, "--shape", "0x5"}), lab::kExitUsage);
  std::ifstream in(kept);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "earlier results");
  EXPECT_EQ(usage_error({"--trace", (dir / "new.json").string()}), "");
  EXPECT_FALSE(std::filesystem::exists(dir / "new.json"));  // the check creates nothing
  std::filesystem::remove_all(dir);
}

TEST(Options, OutputFolders) {
  const auto dir = std::filesystem::temp_directory_path() / ("lab_outdir_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a_file") << "x";
  EXPECT_EQ(lab::output_dir_problem(dir.string()), "");
  EXPECT_EQ(lab::output_dir_problem((dir / "new" / "deeper").string()), "");  // create_directories makes it
  EXPECT_FALSE(std::filesystem::exists(dir / "new"));
  EXPECT_NE(lab::output_dir_problem((dir / "a_file").string()).find("a file, not a folder"), std::string::npos);
  EXPECT_NE(lab::output_dir_problem((dir / "a_file" / "sub").string()).find("is not a folder"), std::string::npos);
  EXPECT_NE(lab::output_dir_problem("").find("empty"), std::string::npos);
  EXPECT_THROW(lab::check_output_dir("--dump", (dir / "a_file").string()), lab::UsageError);
  std::filesystem::remove_all(dir);
}

TEST(ExitStatus, NoDeviceSaysWhich) {
  // No driver at all: cudaDriverGetVersion gives 0, whatever cudaGetDeviceCount said.
  EXPECT_NE(lab::no_device_reason(cudaErrorInsufficientDriver, 0, 0, 13000).find("no NVIDIA driver is installed"),
            std::string::npos);
  // A driver too old for the runtime.
  const std::string old = lab::no_device_reason(cudaErrorInsufficientDriver, 0, 12040, 13000);
  EXPECT_NE(old.find("supports CUDA 12.4, older than the CUDA 13.0 runtime"), std::string::npos) << old;
  // A driver that sees no GPU.
  EXPECT_NE(lab::no_device_reason(cudaErrorNoDevice, 0, 13000, 13000).find("sees no GPU"), std::string::npos);
  EXPECT_NE(lab::no_device_reason(cudaSuccess, 0, 13010, 13000).find("CUDA 13.1) sees no GPU"), std::string::npos);
  // Anything else: the runtime's own words.
  EXPECT_NE(lab::no_device_reason(cudaErrorDevicesUnavailable, 0, 13000, 13000).find("cudaErrorDevicesUnavailable"),
            std::string::npos);
}

TEST(Options, SeedProblemsNameTheValue) {
  EXPECT_EQ(lab::seed_problem("42"), "");
  EXPECT_NE(lab::seed_problem("").find("empty"), std::string::npos);
  EXPECT_NE(lab::seed_problem("-1").find("not a whole number"), std::string::npos);
  EXPECT_NE(lab::seed_problem("18446744073709551616").find("above"), std::string::npos);
}

}  // namespace

// A demo's output file (lab::write_output) is written beside its path and renamed over it. A write
// that fails partway (here: the process's file-size limit, as a full disk would) leaves the old
// file as it was and nothing beside it; a path beside it that is not the call's (a folder) stays.
TEST(DemoOutput, AFailedWriteLeavesTheOldFileAndNothingBeside) {
  const auto dir = std::filesystem::temp_directory_path() / ("lab_write_output_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rows.csv").string(), partial = path + ".partial";
  auto read = [](const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  lab::write_output(path, "old\n", "rows");
  EXPECT_EQ(read(path), "old\n");
  EXPECT_FALSE(std::filesystem::exists(partial));

  rlimit was{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &was), 0);
  const auto handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = was;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    lab::write_output(path, std::string(1 << 16, 'x'), "rows");
  } catch (const lab::Error&) {
    threw = true;
  }
  ::setrlimit(RLIMIT_FSIZE, &was);
  std::signal(SIGXFSZ, handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(read(path), "old\n");
  EXPECT_FALSE(std::filesystem::exists(partial));

  std::filesystem::create_directory(partial);  // not the call's file: an error, and left alone
  EXPECT_THROW(lab::write_output(path, "new\n", "rows"), lab::Error);
  EXPECT_TRUE(std::filesystem::is_directory(partial));
  EXPECT_EQ(read(path), "old\n");
  std::filesystem::remove(partial);

  lab::write_output(path, "new\n", "rows");
  EXPECT_EQ(read(path), "new\n");
  EXPECT_FALSE(std::filesystem::exists(partial));
  std::filesystem::remove_all(dir);
}

// The demos' output files are checked before any work (lab::check_writable): a new file is not left
// behind (a run that stops early leaves no empty file), an existing one keeps its contents, and a
// path that cannot be written is a usage error naming the flag.
TEST(DemoOutput, CheckWritableLeavesNoNewFileAndKeepsAnOldOne) {
  const auto dir = std::filesystem::temp_directory_path() / ("lab_check_writable_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fresh = (dir / "new.json").string(), old = (dir / "old.csv").string();
  EXPECT_NO_THROW(lab::check_writable(fresh, "--json"));
  EXPECT_FALSE(std::filesystem::exists(fresh));
  { std::ofstream(old) << "kept\n"; }
  EXPECT_NO_THROW(lab::check_writable(old));
  std::ifstream in(old);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "kept\n");
  EXPECT_NO_THROW(lab::check_writable(""));
  try {
    lab::check_writable((dir / "no_such_folder" / "x.json").string(), "--json");
    ADD_FAILURE() << "a path in a missing folder was taken";
  } catch (const lab::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--json "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// A row of the demos' tables (lab::table_row): Markdown's pipes, or the cells two spaces apart; an
// empty cell stays a cell.
TEST(DemoOutput, TableRowInMarkdownAndPlainText) {
  std::ostringstream md, plain;
  lab::table_row(md, {"model", "", "1.25"}, true);
  lab::table_row(plain, {"model", "", "1.25"}, false);
  EXPECT_EQ(md.str(), "| model |  | 1.25 |\n");
  EXPECT_EQ(plain.str(), "model    1.25\n");
}
