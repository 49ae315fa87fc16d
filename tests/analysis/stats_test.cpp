// stats_test.cpp: order statistics used for step-time summaries (median, min, max, mean, p95).
#include "analysis/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace dtlab::analysis {
namespace {

TEST(Stats, MedianOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{7}), 7.0);
}

TEST(Stats, MinMaxMean) {
  const std::vector<double> v = {412.3, 405.1, 430.0, 401.0};
  EXPECT_DOUBLE_EQ(min_of(v), 401.0);
  EXPECT_DOUBLE_EQ(max_of(v), 430.0);
  EXPECT_NEAR(mean(v), 412.1, 1e-12);  // 1648.4 / 4
}

TEST(Stats, PercentileInterpolatesLinearly) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);  // 1..100
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 100.0);
  EXPECT_NEAR(percentile(v, 95), 95.05, 1e-9);  // rank 0.95 * 99 = 94.05 -> 95 + 0.05
  EXPECT_DOUBLE_EQ(percentile(v, 50), 50.5);    // rank 0.5 * 99 = 49.5 -> 50 + 0.5
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{5}, 95), 5.0);
}

TEST(Stats, SummarizeByHand) {
  const std::vector<double> v = {10, 50, 20, 40, 30, 1000};
  const Stats s = summarize(v);
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 1000);
  EXPECT_DOUBLE_EQ(s.median, 35);          // sorted 10 20 30 40 50 1000: (30 + 40) / 2
  EXPECT_NEAR(s.mean, 1150.0 / 6, 1e-12);  // 191.67
  EXPECT_DOUBLE_EQ(s.p95, 762.5);          // rank 0.95 * 5 = 4.75 -> 50 + 0.75 * (1000 - 50): the outlier pulls it
}

TEST(Stats, RejectsEmptyNaNAndBadPercent) {
  const std::vector<double> empty;
  EXPECT_THROW(median(empty), std::invalid_argument);
  EXPECT_THROW(summarize(empty), std::invalid_argument);
  EXPECT_THROW(mean(std::vector<double>{1, std::nan("")}), std::invalid_argument);
  EXPECT_THROW(percentile(std::vector<double>{1, 2}, 101), std::invalid_argument);
  EXPECT_THROW(percentile(std::vector<double>{1, 2}, -1), std::invalid_argument);
}

}  // namespace
}  // namespace dtlab::analysis
