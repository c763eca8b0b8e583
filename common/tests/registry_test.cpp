#include "lab/registry.hpp"

#include <gtest/gtest.h>

#include "fake_topic.hpp"
#include "lab/check.hpp"

namespace {

TEST(Registry, RegistersAndOrdersVariants) {
  lab::Registry reg;
  lab::register_variant<FakeTopic>(reg, "optimized_fake", lab::Role::optimized, lab::kFinalStep, "final", &fake_run);
  lab::register_variant<FakeTopic>(reg, "library_fake", lab::Role::library, lab::kFinalStep, "lib", &fake_run);
  lab::register_variant<FakeTopic>(reg, "optimized_fake_step", lab::Role::optimized, 1, "step 1", &fake_run);
  lab::register_variant<FakeTopic>(reg, "baseline_fake", lab::Role::baseline, lab::kFinalStep, "naive", &fake_run);
  const auto all = reg.variants();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]->program, "baseline_fake");
  EXPECT_EQ(all[1]->program, "optimized_fake_step");
  EXPECT_EQ(all[2]->program, "optimized_fake");
  EXPECT_EQ(all[3]->program, "library_fake");
  // One topic object shared by all four.
  EXPECT_EQ(all[0]->topic, all[3]->topic);
  EXPECT_EQ(all[0]->topic->name, "fake");
  EXPECT_EQ(all[0]->topic->folder(), "ch01_basics");
  EXPECT_EQ(reg.find("library_fake")->description, "lib");
  EXPECT_EQ(reg.find("nope"), nullptr);
  EXPECT_EQ(reg.of_topic("fake").size(), 4u);
  EXPECT_TRUE(reg.of_topic("other").empty());
}

TEST(Registry, DuplicateProgramIsAnError) {
  lab::Registry reg;
  lab::register_variant<FakeTopic>(reg, "baseline_fake", lab::Role::baseline, 0, "a", &fake_run);
  EXPECT_THROW(lab::register_variant<FakeTopic>(reg, "baseline_fake", lab::Role::baseline, 0, "b", &fake_run), lab::Error);
}

TEST(Registry, TopicInfoComesFromTheTopic) {
  const auto t = lab::topic_info<FakeTopic>();
  EXPECT_EQ(t.dims, (std::vector<std::string>{"rows", "cols"}));
  EXPECT_EQ(t.sweep.size(), 2u);
  EXPECT_EQ(t.checks.front(), (lab::Shape{1, 1}));
  EXPECT_DOUBLE_EQ(t.work({10, 20}).bytes, 1600.0);
  EXPECT_EQ(t.validate({1, 2000}), "at most 1000 columns");
  EXPECT_EQ(t.validate({1, 20}), "");
}

TEST(Registry, ProgramNameFromPath) {
  EXPECT_EQ(lab::program_name_from_path("/a/b/ch01_basics/optimized_coalescing.cu"), "optimized_coalescing");
  EXPECT_EQ(lab::program_name_from_path("baseline_x.cu"), "baseline_x");
  EXPECT_EQ(lab::program_name_from_path("C:\\src\\library_y.cu"), "library_y");
}

TEST(Registry, ChapterFolders) {
  EXPECT_EQ(lab::chapter_folder(1), "ch01_basics");
  EXPECT_EQ(lab::chapter_folder(4), "ch04_compile_vs_fused");
  EXPECT_EQ(lab::chapter_folder(9), "");
}

const std::vector<std::string> kDims{"rows", "cols"};

TEST(Shape, ParsesAndPrints) {
  const auto s = lab::parse_shape("1000x777", kDims);
  EXPECT_EQ(s, (lab::Shape{1000, 777}));
  EXPECT_EQ(s.str(), "1000x777");
  EXPECT_EQ(s.elements(), 777000);
  EXPECT_EQ(lab::parse_shape(s.str(), kDims), s);
}

TEST(Shape, RejectsBadText) {
  for (const char* bad : {"", "x", "10x", "x10", "10", "10x20x30", "0x5", "5x0", "-3x4", "4x-3", "axb", "10x2.5",
                          " 10x10", "10x10 ", "99999999999999999999x1", "4294967296x4294967296", "1e3x10"}) {
    EXPECT_THROW(lab::parse_shape(bad, kDims), lab::UsageError) << "'" << bad << "'";
  }
}

TEST(Shape, ErrorsNameTheFlagAndTheProblem) {
  try {
    lab::parse_shape("0x5", kDims, "--shape");
    FAIL() << "no throw";
  } catch (const lab::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--shape 0x5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("positive"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), lab::kExitUsage);
  }
  try {
    lab::parse_shape("10", kDims);
    FAIL() << "no throw";
  } catch (const lab::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rowsxcols"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

struct ToleranceProbe : lab::Problem {
  void poison(cudaStream_t) override {}
  lab::Verdict verify() override { return {}; }
};

TEST(Problem, AVariantMayNameItsOwnTolerance) {
  ToleranceProbe p;
  EXPECT_STREQ(p.tolerance_or(lab::Tolerance::fp32()).name, "fp32");  // the topic's default
  p.tolerance_override = lab::Tolerance{5e-4, 1e-5, 2e-4, "gelu tanh approximation"};
  const lab::Tolerance t = p.tolerance_or(lab::Tolerance::fp32());
  EXPECT_STREQ(t.name, "gelu tanh approximation");
  EXPECT_DOUBLE_EQ(t.atol, 5e-4);
}

TEST(Shape, SwitchDimsTakeZeroOrOne) {
  const std::vector<std::string> dims{"seq", "causal"}, switches{"causal"};
  EXPECT_EQ(lab::parse_shape("128x0", dims, "--shape", switches), (lab::Shape{128, 0}));
  EXPECT_EQ(lab::parse_shape("128x1", dims, "--shape", switches), (lab::Shape{128, 1}));
  // A switch is not an extent: off or on, the shape holds 128 elements.
  EXPECT_EQ(lab::parse_shape("128x0", dims, "--shape", switches).elements(), 128);
  EXPECT_EQ(lab::parse_shape("128x1", dims, "--shape", switches).elements(), 128);
  EXPECT_THROW(lab::parse_shape("0x1", dims, "--shape", switches), lab::UsageError);  // seq is an extent
  try {
    lab::parse_shape("128x2", dims, "--shape", switches);
    FAIL() << "no throw";
  } catch (const lab::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("causal is a switch: 0 (off) or 1 (on), got 2"), std::string::npos) << e.what();
  }
  // Without the switch list the same text is an error: zero is not an extent.
  EXPECT_THROW(lab::parse_shape("128x0", dims), lab::UsageError);
}

}  // namespace
