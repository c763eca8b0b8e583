// The roofline's arithmetic, on made-up ceilings: no GPU needed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lab/roofline.hpp"

namespace {

namespace rl = lab::roofline;

rl::Ceilings h100ish() {
  rl::Ceilings c;
  c.copy_gbs = 3000;
  c.fp32_tflops = 60;
  c.tf32_tflops = 400;
  c.bf16_tflops = 750;
  return c;
}

TEST(Roofline, RidgePoints) {
  EXPECT_DOUBLE_EQ(rl::ridge(60, 3000), 20.0);  // 60e12 FLOP/s over 3e12 B/s
  EXPECT_DOUBLE_EQ(rl::ridge(750, 3000), 250.0);
  EXPECT_DOUBLE_EQ(rl::ridge(1, 0), 0.0);
}

TEST(Roofline, MemoryBoundKernelsAreMeasuredAgainstBandwidth) {
  const auto c = h100ish();
  // saxpy: 12 bytes and 2 FLOPs per element; 2^28 elements in 1.2 ms.
  const double n = 268435456;
  const auto p = rl::place("saxpy", "built-in", 12 * n, 2 * n, 1.2e-3, c);
  EXPECT_NEAR(p.intensity, 1.0 / 6.0, 1e-12);
  EXPECT_EQ(p.bound, "memory");
  EXPECT_NEAR(p.gbs, 12 * n / 1.2e-3 / 1e9, 1e-9);
  EXPECT_NEAR(p.percent, 100 * p.gbs / 3000, 1e-9);
  EXPECT_NEAR(p.roof_tflops, p.intensity * 3.0, 1e-12);   // I x 3 TB/s
  EXPECT_NEAR(p.tflops / p.roof_tflops * 100, p.percent, 1e-9);  // the same share either way
  // A copy-only kernel (transpose): intensity 0, still memory-bound, % of the copy bandwidth.
  const auto t = rl::place_rates("transpose", "built-in", 2850, 0, c);
  EXPECT_EQ(t.intensity, 0);
  EXPECT_EQ(t.bound, "memory");
  EXPECT_NEAR(t.percent, 95.0, 1e-9);
}

TEST(Roofline, ComputeBoundKernelsAreMeasuredAgainstThePeak) {
  const auto c = h100ish();
  // SGEMM 8192^3: 2 N^3 FLOPs over 3 N^2 x 4 bytes: intensity N / 6, far right of the ridge.
  const double n = 8192;
  const auto p = rl::place("sgemm", "built-in", 12 * n * n, 2 * n * n * n, 0.022, c);
  EXPECT_NEAR(p.intensity, n / 6, 1e-9);
  EXPECT_EQ(p.bound, "compute");
  EXPECT_DOUBLE_EQ(p.roof_tflops, 60);
  EXPECT_NEAR(p.percent, 100 * (2 * n * n * n / 0.022 / 1e12) / 60, 1e-9);
  EXPECT_THROW(rl::place("x", "y", 1, 1, 0, c), std::invalid_argument);
  EXPECT_THROW(rl::place_rates("x", "y", 1, 1, rl::Ceilings{}), std::invalid_argument);
}

TEST(Roofline, ReadsACompareRun) {
  const auto c = h100ish();
  const nlohmann::json run = {
      {"programs",
       {{{"program", "optimized_reduction"},
         {"status", "OK"},
         {"shapes",
          {{{"shape", "268435456"}, {"status", "OK"}, {"counters", {{"GB/s", {2900, 3000, 3100}}, {"TFLOP/s", {0.7, 0.75, 0.8}}}}},
           {{"shape", "1"}, {"status", "WRONG"}, {"counters", {{"GB/s", {1}}}}}}}},
        {{"program", "baseline_crash"}, {"status", "CRASH"}, {"shapes", nlohmann::json::array()}},
        {{"program", "optimized_coalescing"},
         {"status", "OK"},
         {"shapes", {{{"shape", "8192x8192"}, {"status", "OK"}, {"counters", {{"GB/s", {2855}}}}}}}}}}};
  const auto pts = rl::from_compare_json(run.dump(), "r.json", c);
  ASSERT_EQ(pts.size(), 2u);  // failed shapes and programs are left out
  EXPECT_EQ(pts[0].name, "optimized_reduction 268435456");
  EXPECT_EQ(pts[0].source, "r.json");
  EXPECT_NEAR(pts[0].gbs, 3000, 1e-9);  // the median of the samples
  EXPECT_NEAR(pts[0].intensity, 0.75e12 / 3000e9, 1e-12);
  EXPECT_EQ(pts[1].intensity, 0);
  EXPECT_THROW(rl::from_compare_json("[1, 2]", "x", c), std::runtime_error);
  EXPECT_THROW(rl::from_compare_json("not json", "x", c), std::runtime_error);

  const auto j = nlohmann::json::parse(rl::to_json(c, pts, "Fake GPU"));
  EXPECT_DOUBLE_EQ(j["ridge_flop_per_byte"]["fp32"].get<double>(), 20.0);
  EXPECT_EQ(j["points"].size(), 2u);
  const std::string text = rl::table(c, pts);
  EXPECT_NE(text.find("optimized_reduction 268435456"), std::string::npos) << text;
  EXPECT_NE(text.find("100.0%"), std::string::npos) << text;
  EXPECT_EQ(rl::csv(pts).rfind("kernel,source,flop_per_byte", 0), 0u);
}

}  // namespace
