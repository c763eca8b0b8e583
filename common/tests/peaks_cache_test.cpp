#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "lab/device.hpp"

namespace {

namespace fs = std::filesystem;

class PeaksCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lab-peaks-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PeaksCache, RoundTripsPerUuid) {
  lab::Peaks p;
  p.copy_gbs = 3012.5;
  p.fp32_tflops = 51.25;
  p.measured_at = "2026-11-22T00:00:00Z";
  lab::save_peaks(dir_, "GPU-aaaa", p);
  const auto back = lab::load_peaks(dir_, "GPU-aaaa");
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->copy_gbs, 3012.5);
  EXPECT_DOUBLE_EQ(back->fp32_tflops, 51.25);
  EXPECT_EQ(back->measured_at, p.measured_at);
  EXPECT_TRUE(back->from_cache);
  EXPECT_FALSE(lab::load_peaks(dir_, "GPU-bbbb").has_value());  // another device: not this cache
}

TEST_F(PeaksCache, DamagedFileIsIgnored) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "peaks-GPU-cccc.json") << "{ not json";
  EXPECT_FALSE(lab::load_peaks(dir_, "GPU-cccc").has_value());
  std::ofstream(dir_ / "peaks-GPU-dddd.json")
      << R"({"format": 1, "uuid": "GPU-dddd", "copy_gbs": 0, "fp32_tflops": 5, "measured_at": "x"})";
  EXPECT_FALSE(lab::load_peaks(dir_, "GPU-dddd").has_value());  // a zero peak is not a measurement
}

TEST_F(PeaksCache, CacheDirFollowsTheEnvironment) {
  ::setenv("LAB_CACHE_DIR", dir_.c_str(), 1);
  EXPECT_EQ(lab::cache_dir(), dir_);
  ::unsetenv("LAB_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(lab::cache_dir(), fs::path("/tmp/xdg/cuda-perf-lab"));
  ::unsetenv("XDG_CACHE_HOME");
}

TEST(DeviceFacts, DatasheetPeaksFromAttributes) {
  lab::DeviceFacts h100;  // the attributes an H100 SXM reports
  h100.cc_major = 9;
  h100.cc_minor = 0;
  h100.sms = 132;
  h100.sm_clock_khz = 1980000;
  h100.mem_clock_khz = 2619000;
  h100.bus_width_bits = 5120;
  EXPECT_EQ(h100.arch(), "sm_90");
  EXPECT_EQ(h100.fp32_lanes_per_sm(), 128);
  EXPECT_NEAR(h100.datasheet_bandwidth_gbs(), 3352.3, 0.1);
  EXPECT_NEAR(h100.datasheet_fp32_tflops(), 66.9, 0.05);
  lab::DeviceFacts a100 = h100;
  a100.cc_major = 8;
  EXPECT_EQ(a100.fp32_lanes_per_sm(), 64);
  EXPECT_EQ(lab::cuda_version_text(13000), "13.0");
  EXPECT_EQ(lab::cuda_version_text(12080), "12.8");
}

}  // namespace
