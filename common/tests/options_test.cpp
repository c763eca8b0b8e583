// The shared main's flags and exit statuses, without a GPU.
#include "lab/harness.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_topic.hpp"
#include "lab/check.hpp"
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
  for (const char* s : {"--shape", "--cache", "--check-only", "--no-check", "--seed", "--describe",
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
