// The profiler's views of a recording (table, Chrome trace), on synthetic records: no GPU needed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lab/profiler.hpp"

namespace {

using lab::prof::Kind;
using lab::prof::Record;

std::vector<Record> sample() {
  // Two streams; a kernel run three times, another once, a copy, a memset, runtime calls, a range.
  return {
      {Kind::range, "timed 64x64", 1000, 90000, 0, 0, 0, 0},
      {Kind::api, "cudaLaunchKernel", 1100, 1600, 0, 0, 4242, 0},
      {Kind::kernel, "square(float*, int)", 2000, 12000, 0, 7, 0, 0},  // 10 us
      {Kind::kernel, "square(float*, int)", 12000, 32000, 0, 7, 0, 0},  // 20 us
      {Kind::kernel, "square(float*, int)", 32000, 62000, 0, 7, 0, 0},  // 30 us
      {Kind::kernel, "reduce(float const*, float*)", 62000, 67000, 0, 13, 0, 0},  // 5 us
      {Kind::memcpy, "memcpy HtoD (pinned -> device)", 67000, 87000, 0, 13, 0, 1000000},  // 20 us, 1 MB
      {Kind::memset, "memset (device)", 87000, 88000, 0, 7, 0, 4096},  // 1 us
  };
}

TEST(Profiler, KeyAveragesGroupsSortsAndPercentages) {
  const auto rows = lab::prof::key_averages(sample());
  ASSERT_EQ(rows.size(), 4u);  // GPU activity only: the API call and the range are not rows
  EXPECT_EQ(rows[0].name, "square(float*, int)");
  EXPECT_EQ(rows[0].calls, 3);
  EXPECT_DOUBLE_EQ(rows[0].total_us, 60.0);
  EXPECT_DOUBLE_EQ(rows[0].avg_us, 20.0);
  EXPECT_DOUBLE_EQ(rows[0].min_us, 10.0);
  EXPECT_DOUBLE_EQ(rows[0].max_us, 30.0);
  EXPECT_EQ(rows[1].kind, Kind::memcpy);  // 20 us: second by total
  EXPECT_EQ(rows[2].name, "reduce(float const*, float*)");
  EXPECT_EQ(rows[3].kind, Kind::memset);
  double sum = 0;
  for (const auto& r : rows) sum += r.percent;
  EXPECT_NEAR(sum, 100.0, 1e-9);
  EXPECT_NEAR(rows[0].percent, 100.0 * 60 / 86, 1e-9);
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].total_us, rows[i].total_us);

  const std::string table = lab::prof::format_table(rows);
  EXPECT_NE(table.find("square(float*, int)"), std::string::npos) << table;
  EXPECT_NE(table.find("60.000 us"), std::string::npos) << table;
  EXPECT_NE(table.find("69.8%"), std::string::npos) << table;
  EXPECT_NE(table.find("(all GPU activity)"), std::string::npos) << table;
  auto anon = rows;
  anon[0].name = "(anonymous namespace)::square(float*, int)";
  EXPECT_EQ(lab::prof::format_table(anon), table);  // the namespace noise is dropped from the table
  const std::string narrow = lab::prof::format_table(rows, 10);
  EXPECT_NE(narrow.find("square(..."), std::string::npos) << narrow;
}

TEST(Profiler, ChromeTraceHasTracksAndEvents) {
  const auto j = nlohmann::json::parse(lab::prof::chrome_trace(sample(), "optimized_square"));
  ASSERT_TRUE(j.contains("traceEvents"));
  int complete = 0, gpu = 0, host = 0;
  bool stream7 = false, stream13 = false, phases = false, thread = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") {
      const std::string n = e["args"]["name"];
      stream7 |= n == "stream 7";
      stream13 |= n == "stream 13";
      phases |= n == "phases (NVTX)";
      thread |= n == "thread 4242 (CUDA runtime)";
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ++complete;
    (e["pid"] == 1 ? gpu : host)++;
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["name"] == "memcpy HtoD (pinned -> device)") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 66.0);  // microseconds after the earliest record
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 20.0);
      EXPECT_EQ(e["tid"], 13);
      EXPECT_EQ(e["args"]["bytes"], 1000000);
      EXPECT_DOUBLE_EQ(e["args"]["GB/s"].get<double>(), 50.0);
    }
    if (e["cat"] == "range") {
      EXPECT_EQ(e["tid"], 0);
    }
  }
  EXPECT_EQ(complete, 8);
  EXPECT_EQ(gpu, 6);
  EXPECT_EQ(host, 2);
  EXPECT_TRUE(stream7 && stream13 && phases && thread);
  // An empty recording is still a valid document.
  EXPECT_NO_THROW(nlohmann::json::parse(lab::prof::chrome_trace({}, "x")));
}

TEST(Profiler, Demangles) {
  EXPECT_EQ(lab::prof::demangle("_Z6squarePfi"), "square(float*, int)");
  EXPECT_EQ(lab::prof::demangle("not_mangled"), "not_mangled");
  EXPECT_EQ(lab::prof::demangle(nullptr), "(unnamed)");
}

}  // namespace
