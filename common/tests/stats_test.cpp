#include "lab/stats.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace st = lab::stats;

TEST(Stats, Median) {
  const std::vector<double> odd{5, 1, 3}, even{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(st::median(odd), 3.0);
  EXPECT_DOUBLE_EQ(st::median(even), 2.5);
}

TEST(Stats, QuantileMatchesRType7) {
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(st::quantile(x, 0.25), 3.25);  // R: quantile(1:10, 0.25)
  EXPECT_DOUBLE_EQ(st::quantile(x, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(st::quantile(x, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(st::quantile(x, 1.0), 10.0);
  EXPECT_THROW(st::quantile(x, 1.5), std::invalid_argument);
}

TEST(Stats, MeanStddevCv) {
  const std::vector<double> x{2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(st::mean(x), 5.0);
  EXPECT_NEAR(st::stddev(x), std::sqrt(32.0 / 7.0), 1e-12);  // sample (n - 1)
  EXPECT_NEAR(st::cv(x), std::sqrt(32.0 / 7.0) / 5.0, 1e-12);
}

TEST(Stats, Geomean) {
  const std::vector<double> x{1, 10, 100};
  EXPECT_NEAR(st::geomean(x), 10.0, 1e-12);
  const std::vector<double> bad{1, 0};
  EXPECT_THROW(st::geomean(bad), std::invalid_argument);
}

TEST(Stats, EmptyInputsThrow) {
  const std::vector<double> none, one{1.0};
  EXPECT_THROW(st::median(none), std::invalid_argument);
  EXPECT_THROW(st::mean(none), std::invalid_argument);
  EXPECT_THROW(st::stddev(one), std::invalid_argument);
  EXPECT_DOUBLE_EQ(st::min(one), 1.0);
  EXPECT_DOUBLE_EQ(st::max(one), 1.0);
}

}  // namespace
