#include "lab/registry.hpp"

#include <gtest/gtest.h>

#include "fake_topic.hpp"
#include "lab/check.hpp"
#include "lab/device.hpp"
#include "lab/harness.hpp"

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

// Registration runs before main, where a throw aborts the program: what it refuses is set aside,
// and every lookup after it throws the reasons (exit status 2), from main.
void expect_lookups_refused(const lab::Registry& reg, const std::vector<std::string>& reasons) {
  for (int lookup = 0; lookup < 3; ++lookup) {
    try {
      if (lookup == 0) reg.variants();
      if (lookup == 1) reg.find("baseline_fake");
      if (lookup == 2) reg.of_topic("fake");
      ADD_FAILURE() << "lookup " << lookup << " did not throw";
    } catch (const lab::Error& e) {
      const std::string w = e.what();
      EXPECT_EQ(e.exit_code(), lab::kExitUsage) << w;
      for (const auto& r : reasons) EXPECT_NE(w.find(r), std::string::npos) << "lookup " << lookup << ": " << w;
    }
  }
}

TEST(Registry, DuplicateProgramIsAnError) {
  lab::Registry reg;
  lab::register_variant<FakeTopic>(reg, "baseline_fake", lab::Role::baseline, 0, "a", &fake_run);
  EXPECT_NE(reg.find("baseline_fake"), nullptr);  // nothing refused yet
  const lab::Variant& refused =
      lab::register_variant<FakeTopic>(reg, "baseline_fake", lab::Role::baseline, 0, "b", &fake_run);  // no throw
  EXPECT_EQ(refused.description, "b");
  expect_lookups_refused(reg, {"'baseline_fake' registered twice"});
}

// A variant's own check shapes (Declared::checks): added to its topic's, once each, in its check
// set and in what a run verifies; a shape its topic cannot verify refuses the variant, naming it.
TEST(Registry, AVariantsOwnCheckShapesJoinItsTopicsAndBadOnesAreRefused) {
  lab::Registry reg;
  const lab::Variant& plain =
      lab::register_variant<FakeTopic>(reg, "baseline_fake", lab::Role::baseline, 0, "a", &fake_run);
  const lab::Variant& own = lab::register_variant<FakeTopic>(reg, "optimized_fake", lab::Role::optimized, lab::kFinalStep,
                                                             "b", &fake_run, {.checks = {{9, 11}, {3, 5}}});
  EXPECT_EQ(lab::check_set(plain), (std::vector<lab::Shape>{{1, 1}, {3, 5}}));
  EXPECT_EQ(lab::check_set(own), (std::vector<lab::Shape>{{1, 1}, {3, 5}, {9, 11}}));  // {3, 5} once
  EXPECT_EQ(lab::shapes_to_verify(own, {{64, 64}}), (std::vector<lab::Shape>{{1, 1}, {3, 5}, {9, 11}, {64, 64}}));
  EXPECT_EQ(lab::shapes_to_verify(own, {{64, 64}}, false), (std::vector<lab::Shape>{{64, 64}}));  // --skip-check-set
  EXPECT_EQ(lab::shapes_to_verify(plain, {{64, 64}}), (std::vector<lab::Shape>{{1, 1}, {3, 5}, {64, 64}}));
  EXPECT_EQ(reg.variants().size(), 2u);  // nothing refused
  const std::string help = lab::help_text(own);
  EXPECT_NE(help.find("and this variant's own (where a code path of its own starts): 9x11"), std::string::npos) << help;
  EXPECT_EQ(lab::help_text(plain).find("this variant's own"), std::string::npos);

  for (const auto& [shape, why] : std::vector<std::pair<lab::Shape, std::string>>{
           {{2, 2000}, "at most 1000 columns"},            // the topic's validate
           {{7, 3}, "the CPU reference's limits or the topic's own"},  // the topic's verifiable
           {{200000, 1000}, "the CPU reference's limits"},  // over kVerifyBytesLimit (1.6 GB)
           {{4, 4, 4}, "not 2 extents"}}) {
    lab::Registry bad;
    lab::register_variant<FakeTopic>(bad, "optimized_fake", lab::Role::optimized, lab::kFinalStep, "c", &fake_run,
                                     {.checks = {shape}});
    expect_lookups_refused(bad, {"'optimized_fake' declares the check shape " + shape.str(), why});
  }
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
  // A ladder's sort key is not part of the name: ch04's steps keep their programs' names.
  EXPECT_EQ(lab::program_name_from_path("ch04/attention/forward/03_optimized_attention_fused.cu"),
            "optimized_attention_fused");
  EXPECT_EQ(lab::program_name_from_path("ladder/03a_optimized_inserted.cu"), "optimized_inserted");
  EXPECT_EQ(lab::program_name_from_path("ladder/00_baseline_x.cu"), "baseline_x");
  EXPECT_EQ(lab::program_name_from_path("ladder/03A_optimized_x.cu"), "03A_optimized_x");  // not a sort key
}

TEST(Registry, StorageTwinNames) {
  EXPECT_EQ(lab::storage_twin_name("optimized_layernorm", ""), "optimized_layernorm");
  EXPECT_EQ(lab::storage_twin_name("optimized_layernorm", "_bf16"), "optimized_layernorm_bf16");
  EXPECT_EQ(lab::storage_twin_name("optimized_layernorm", "_fp16"), "optimized_layernorm_fp16");
  // A program named for bf16: its fp16 twin's name says fp16 where it said bf16.
  EXPECT_EQ(lab::storage_twin_name("optimized_gelu_bf16", "_fp16"), "optimized_gelu_fp16");
  EXPECT_EQ(lab::storage_twin_name("optimized_gelu_bf16_in_registers", "_fp16"), "optimized_gelu_fp16_in_registers");
  EXPECT_EQ(lab::storage_twin_name("optimized_gelu_bf16", ""), "optimized_gelu_bf16");
  // "_bf16" only as a word of the name.
  EXPECT_EQ(lab::storage_twin_name("optimized_x_bf16s", "_fp16"), "optimized_x_bf16s_fp16");
  EXPECT_EQ(lab::storage_twin_name("optimized_x_bf16s_bf16", "_fp16"), "optimized_x_bf16s_fp16");
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

// A variant written as a class: its members are its state (made by its constructor, the prepare
// step), and it declares its tolerance, precision, outputs and the shapes it supports.
struct CountingVariant {
  using Topic = FakeTopic;
  int runs = 0;
  std::int64_t rows = 0;  // read from the problem by the prepare step
  explicit CountingVariant(const FakeTopic::Problem& p) : rows(p.rows) {}
  void run(FakeTopic::Problem&, cudaStream_t) { ++runs; }
  std::vector<std::pair<std::string, double>> counters(const FakeTopic::Problem&, double seconds) {
    return {{"runs", double(runs)}, {"rows", double(rows)}, {"seconds", seconds}};
  }
  static lab::Declared declared() {
    return {.tolerance = lab::Tolerance{5e-4, 1e-5, 2e-4, "declared approximation"}, .precision = "bf16",
            .writes = {"lse"}};
  }
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts&) {
    return s[0] < 2 ? "needs two rows or more" : "";
  }
};

// The variant protocol's concepts, both ways, checked when this file compiles: each class below
// breaks one rule, and registering it (register_variant_class) would not compile
// (tests/compile_fail/ proves that with the compiler itself).
struct RunsOnly {
  using Topic = FakeTopic;
  void run(FakeTopic::Problem&, cudaStream_t) {}
};
struct SupportsWithoutTheDevice : RunsOnly {
  static std::string supports(const lab::Shape&) { return ""; }
};
struct DeclaredNotStatic : RunsOnly {
  lab::Declared declared() const { return {}; }
};
struct CountersWithoutTheSeconds : RunsOnly {
  std::vector<std::pair<std::string, double>> counters(const FakeTopic::Problem&) { return {}; }
};
struct RunWithoutTheStream {
  using Topic = FakeTopic;
  void run(FakeTopic::Problem&) {}
};
struct NoWayToPrepare : RunsOnly {
  explicit NoWayToPrepare(int) {}
};
static_assert(lab::VariantClass<CountingVariant> && lab::VariantClass<RunsOnly>);
static_assert(!lab::VariantClass<SupportsWithoutTheDevice>);
static_assert(!lab::VariantClass<DeclaredNotStatic>);
static_assert(!lab::VariantClass<CountersWithoutTheSeconds>);
static_assert(!lab::VariantClass<RunWithoutTheStream>);
static_assert(!lab::VariantClass<NoWayToPrepare>);

TEST(Registry, AVariantClassOwnsItsStateAndDeclaresWhatItIs) {
  lab::Registry reg;
  const lab::Variant* registered = &lab::register_variant_class<CountingVariant>(
      reg, "optimized_counting", lab::Role::optimized, lab::kFinalStep, "counts");
  const lab::Variant& v = *registered;
  EXPECT_EQ(v.topic->name, "fake");
  EXPECT_EQ(v.declared.precision, "bf16");
  EXPECT_TRUE(v.declared.writes_output("lse"));
  EXPECT_FALSE(v.declared.writes_output("o"));
  const lab::DeviceFacts facts;
  EXPECT_EQ(v.supports({1, 5}, facts), "needs two rows or more");
  EXPECT_EQ(v.supports({3, 5}, facts), "");

  // The problem made for the variant reads its declarations; the variant's state is its own.
  lab::Rng rng(1);
  auto p = v.topic->make({3, 5}, rng, v.declared);
  EXPECT_STREQ(p->tolerance_or(lab::Tolerance::fp32()).name, "declared approximation");
  EXPECT_EQ(p->declared().precision, "bf16");
  auto instance = v.prepare(*p, nullptr);
  instance->run(*p, nullptr);
  instance->run(*p, nullptr);
  const auto c = instance->counters(*p, 0.5);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (std::pair<std::string, double>{"runs", 2.0}));
  EXPECT_EQ(c[1], (std::pair<std::string, double>{"rows", 3.0}));

  // A variant that declares nothing: the topic's defaults, every shape supported.
  const lab::Variant* registered_plain =
      &lab::register_variant<FakeTopic>(reg, "baseline_plain", lab::Role::baseline, lab::kFinalStep, "plain", &fake_run);
  const lab::Variant& plain = *registered_plain;
  auto q = plain.topic->make({1, 1}, rng, plain.declared);
  EXPECT_STREQ(q->tolerance_or(lab::Tolerance::fp32()).name, "fp32");
  EXPECT_EQ(q->declared().precision, "fp32");
  EXPECT_EQ(plain.supports({1, 1}, facts), "");
  EXPECT_TRUE(plain.prepare(*q, nullptr)->counters(*q, 1.0).empty());
}

// A topic whose check holds every variant to its own bound (it never calls tolerance_or).
struct OwnBoundTopic : FakeTopic {
  static constexpr const char* name = "own_bound";
  static constexpr bool reads_declared_tolerance = false;
};
struct DeclaresATolerance {
  using Topic = OwnBoundTopic;
  void run(OwnBoundTopic::Problem&, cudaStream_t) {}
  static lab::Declared declared() { return {.tolerance = lab::Tolerance::per_element(5e-4, 1e-5, "loose")}; }
};

TEST(Registry, AToleranceTheTopicDoesNotReadIsRefused) {
  // Declared where the topic's check reads it: taken, and the problem judges by it.
  lab::Registry reg;
  const lab::Variant& ok = lab::register_variant_class<CountingVariant>(reg, "optimized_counting", lab::Role::optimized,
                                                                        lab::kFinalStep, "counts");
  EXPECT_TRUE(ok.topic->reads_tolerance);
  lab::Rng rng(1);
  EXPECT_STREQ(ok.topic->make({3, 5}, rng, ok.declared)->verify().tol.name, "declared approximation");
  EXPECT_NE(reg.find("optimized_counting"), nullptr);
  // Declared where it does not: its bound would be printed (--describe) and never applied, so the
  // program refuses to run, naming the variant, its tolerance and the topic.
  lab::Registry strict;
  lab::register_variant_class<DeclaresATolerance>(strict, "optimized_loose", lab::Role::optimized, lab::kFinalStep,
                                                  "loose");
  EXPECT_FALSE(lab::topic_info<OwnBoundTopic>().reads_tolerance);
  expect_lookups_refused(strict, {"'optimized_loose' declares a tolerance (loose)", "topic 'own_bound'",
                                  "reads_declared_tolerance"});
  // The same topic with a variant that declares none registers.
  lab::Registry plain;
  lab::register_variant<OwnBoundTopic>(plain, "baseline_own", lab::Role::baseline, lab::kFinalStep, "plain", &fake_run);
  EXPECT_NE(plain.find("baseline_own"), nullptr);
}

TEST(Registry, TwoVariantsInOneStepAreAnError) {
  lab::Registry reg;
  lab::register_variant<FakeTopic>(reg, "optimized_a", lab::Role::optimized, 1, "a", &fake_run);
  lab::register_variant<FakeTopic>(reg, "optimized_b", lab::Role::optimized, 2, "b", &fake_run);
  EXPECT_EQ(reg.variants().size(), 2u);
  lab::register_variant<FakeTopic>(reg, "optimized_c", lab::Role::optimized, 1, "c", &fake_run);
  lab::register_variant<FakeTopic>(reg, "baseline_a", lab::Role::baseline, lab::kFinalStep, "a", &fake_run);
  lab::register_variant<FakeTopic>(reg, "baseline_b", lab::Role::baseline, lab::kFinalStep, "b", &fake_run);
  // Both refusals named, the first with its step; the baseline that registered first is not refused.
  expect_lookups_refused(reg, {"'optimized_a' and 'optimized_c' of topic 'fake' are both the optimized step 1",
                               "'baseline_a' and 'baseline_b' of topic 'fake' are both the baseline variant"});
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

// %peak_fp32 is a share of the CUDA cores' measured FMA rate: a variant's FLOP rate is stated
// against it only where its arithmetic is fp32 there (the default). The tensor-core precisions the
// lab declares, alone or mixed with fp32 (the GPT-2 steps' "PRODUCTS+ATTENTION-attention"), are not:
// a bf16 step measured 579% of it.
TEST(Registry, OnlyFp32ArithmeticIsAShareOfTheFmaPeak) {
  EXPECT_TRUE(lab::Declared{}.fp32_fma());
  EXPECT_TRUE(lab::Declared{.precision = "fp32"}.fp32_fma());
  for (const char* p : {"bf16", "3xtf32", "fp32+3xtf32-attention", "bf16+bf16-attention", "bf16+hopper-attention"})
    EXPECT_FALSE(lab::Declared{.precision = p}.fp32_fma()) << p;
}
