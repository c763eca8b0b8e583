// The host-side pieces behind the row-wise kernels (CPU only): which register tile a row length
// gets, how the weighted sum's backward splits its rows, and LayerNorm's reference statistics.
#include <gtest/gtest.h>

#include "layernorm.cuh"
#include "losses.cuh"
#include "rows.cuh"
#include "weighted_sum.cuh"

namespace {

rows::Tile chosen(int dim, bool vec4) {
  rows::Tile t{0, 0};
  auto pick = [&](auto lanes, auto items) { t = {decltype(lanes)::value, decltype(items)::value}; };
  const bool ok = vec4 ? rows::with_tile<4>(dim, pick) : rows::with_tile<1>(dim, pick);
  return ok ? t : rows::Tile{0, 0};
}

TEST(RowTiles, TheSmallestTileThatHoldsTheRow) {
  for (const bool vec4 : {true, false}) {
    const int v = vec4 ? 4 : 1;
    for (int dim : {1, 5, 33, 128, 129, 768, 1024, 1025, 4096, 16384, 32768}) {
      const rows::Tile t = chosen(dim, vec4);
      if (t.lanes == 0) {
        EXPECT_GT(dim, 1024 * 8 * v) << "no tile for " << dim << " though the largest holds it";
        continue;
      }
      EXPECT_GE(t.lanes * t.items * v, dim) << dim;
      // No smaller tile in the list would have held it.
      for (const rows::Tile& smaller : rows::kTiles) {
        if (smaller.lanes * smaller.items >= t.lanes * t.items) break;
        EXPECT_LT(smaller.lanes * smaller.items * v, dim) << dim;
      }
    }
  }
  EXPECT_EQ(chosen(64, true).lanes, 4);      // 8 rows a warp: 4 lanes of 4 float4s
  EXPECT_EQ(chosen(64, true).items, 4);
  EXPECT_EQ(chosen(8, true).lanes, 2);       // 16 rows a warp
  EXPECT_EQ(chosen(128, true).lanes, 32);    // from a warp's 128 floats on, a warp or more a row
  EXPECT_EQ(chosen(768, true).lanes, 32);    // a warp per row
  EXPECT_EQ(chosen(16384, true).lanes, 512); // a block per row
  EXPECT_EQ(chosen(40000, true).lanes, 0);   // longer than any tile: N/A for the optimized variants
  EXPECT_EQ(chosen(9001, false).lanes, 0);
}

TEST(RowTiles, OnlyTheFirstTilesWhenLimited) {
  int calls = 0;
  constexpr int kThrough512 = rows::tiles_through(512, 8);
  static_assert(rows::kTiles[kThrough512 - 1].lanes == 512 && rows::kTiles[kThrough512 - 1].items == 8);
  EXPECT_FALSE((rows::with_tile<4, kThrough512>(32768, [&](auto, auto) { ++calls; })));
  EXPECT_TRUE((rows::with_tile<4, kThrough512>(16384, [&](auto, auto) { ++calls; })));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(rows::tiles_through(3, 3), 0);  // not a tile
}

// Sub-warp groups are powers of two (their shuffles stay inside the group), and the tiles grow.
TEST(RowTiles, SubWarpTilesArePowersOfTwoAndCapacitiesGrow) {
  for (int i = 0; i < rows::kTileCount; ++i) {
    const rows::Tile t = rows::kTiles[i];
    if (t.lanes < 32) EXPECT_EQ(t.lanes & (t.lanes - 1), 0) << t.lanes;
    else EXPECT_EQ(t.lanes % 32, 0) << t.lanes;
    if (i > 0) EXPECT_GT(t.lanes * t.items, rows::kTiles[i - 1].lanes * rows::kTiles[i - 1].items) << i;
  }
}

// The cross-entropy's lanes a row: the fewest powers of two (2 to 32) leaving a lane at most 4
// chunks, 512 beyond 8192 classes.
TEST(CrossEntropyLanes, FewestLanesWithAtMostFourChunksEach) {
  EXPECT_EQ(loss::row_lanes(1), 2);
  EXPECT_EQ(loss::row_lanes(8), 2);     // 2 float4s: one a lane
  EXPECT_EQ(loss::row_lanes(64), 4);    // 16 float4s: 4 a lane, 8 rows a warp
  EXPECT_EQ(loss::row_lanes(33), 16);   // 33 floats one by one: 16 lanes of at most 3
  EXPECT_EQ(loss::row_lanes(512), 32);
  EXPECT_EQ(loss::row_lanes(8192), 32);
  EXPECT_EQ(loss::row_lanes(8193), 512);
  for (int c = 1; c <= 8192; ++c) {
    const int lanes = loss::row_lanes(c), chunks = c % 4 == 0 ? c / 4 : c;
    ASSERT_TRUE(lanes >= 2 && lanes <= 32 && (lanes & (lanes - 1)) == 0) << c;
    if (lanes < 32) {
      EXPECT_LE(chunks, 4 * lanes) << c;             // at most 4 chunks a lane
      if (lanes > 2) EXPECT_GT(chunks, 2 * lanes) << c;  // and half the lanes would not do
    }
  }
}

TEST(WeightedSumBackwardPlan, PartsCoverEveryRowOnce) {
  for (int sms : {1, 132}) {
    for (auto [rows, dim] : {std::pair{1, 1}, {64, 128}, {70000, 3}, {16384, 16384}, {5, 4097}, {1 << 20, 4}}) {
      const WeightedSumBackwardPlan plan(rows, dim, sms);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(dim) + " on " + std::to_string(sms) + " SMs");
      EXPECT_EQ(plan.vec, dim % 4 == 0 ? 4 : 1);
      EXPECT_GE(std::int64_t(plan.col_blocks) * plan.threads * plan.vec, dim);
      EXPECT_EQ(plan.threads % 32, 0);
      EXPECT_LE(plan.threads, 256);
      EXPECT_GE(plan.parts, 1);
      EXPECT_LE(plan.parts, 65535);
      // Every row in exactly one part, and no empty part.
      EXPECT_GE(std::int64_t(plan.parts) * plan.rows_per_part, rows);
      EXPECT_LT(std::int64_t(plan.parts - 1) * plan.rows_per_part, rows);
    }
  }
}

TEST(LayerNormReference, TwoPassStatisticsPerRow) {
  // Row 0: 1 2 3 4 (mean 2.5, variance 1.25). Row 1: constant (variance 0: rstd = 1/sqrt(eps)).
  // Row 2: a large offset, where E[x^2] - E[x]^2 in float would lose every digit.
  const std::vector<float> x = {1, 2, 3, 4, 7, 7, 7, 7, 10000.5f, 10001.5f, 10002.5f, 10003.5f};
  const ln::RowStats st = ln::reference_stats(x, 3, 4);
  ASSERT_EQ(st.mean.size(), 3u);
  EXPECT_DOUBLE_EQ(st.mean[0], 2.5);
  EXPECT_DOUBLE_EQ(st.rstd[0], 1.0 / std::sqrt(1.25 + double(ln::kEps)));
  EXPECT_DOUBLE_EQ(st.mean[1], 7.0);
  EXPECT_DOUBLE_EQ(st.rstd[1], 1.0 / std::sqrt(double(ln::kEps)));
  EXPECT_DOUBLE_EQ(st.mean[2], 10002.0);
  EXPECT_DOUBLE_EQ(st.rstd[2], 1.0 / std::sqrt(1.25 + double(ln::kEps)));
}

}  // namespace

// row_fits (what the optimized LayerNorm variants declare) says "" exactly when with_tile finds a
// tile, at both vector widths and with the backward's shorter tile list, and names the limit.
TEST(RowTiles, RowFitsAgreesWithTheTiles) {
  constexpr int kBackward = rows::tiles_through(512, 8);  // the backward's list, up to 512 x 8
  for (int dim : {1, 3, 4, 1023, 1024, 4095, 4096, 4097, 8191, 8192, 8193, 9001, 16383, 16384, 16388, 32764,
                  32768, 32772, 40000}) {
    const bool vec4 = dim % 4 == 0;
    const bool all = vec4 ? rows::with_tile<4>(dim, [](auto, auto) {}) : rows::with_tile<1>(dim, [](auto, auto) {});
    const bool backward_fits =
        vec4 ? rows::with_tile<4, kBackward>(dim, [](auto, auto) {}) : rows::with_tile<1, kBackward>(dim, [](auto, auto) {});
    EXPECT_EQ(rows::row_fits(dim).empty(), all) << dim;
    EXPECT_EQ(rows::row_fits<kBackward>(dim).empty(), backward_fits) << dim;
  }
  EXPECT_NE(rows::row_fits(40000).find("32768"), std::string::npos) << rows::row_fits(40000);
  EXPECT_NE(rows::row_fits<kBackward>(9001).find("4096"), std::string::npos) << rows::row_fits<kBackward>(9001);
}
