// stats_test.cpp: order statistics used for step-time summaries (median, min, max, mean, p95).
#include "lab/stats.hpp"

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

// p95 is nearest rank (result.json's definition since issue 5; the report used linear interpolation until
// issue 11 made one definition): always a measured sample, never a value between two.
TEST(Stats, PercentileIsNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);  // 1..100
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);        // rank clamped to the first sample
  EXPECT_DOUBLE_EQ(percentile(v, 100), 100.0);
  EXPECT_DOUBLE_EQ(percentile(v, 95), 95.0);  // ceil(0.95 * 100) = 95th sample (linear interpolation gave 95.05)
  EXPECT_DOUBLE_EQ(p95(v), 95.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 50.0);  // 50th sample; median() is the midpoint 50.5 instead
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{5}, 95), 5.0);
}

// The pinned definitions result.json uses: nearest-rank p95 and the midpoint median.
TEST(Stats, NearestRankP95AndMidpointMedian) {
  const std::vector<double> twenty = {20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(p95(twenty), 19.0);                                  // ceil(0.95 * 20) = 19th of 20
  EXPECT_DOUBLE_EQ(p95(std::vector<double>{3, 1, 2}), 3.0);             // ceil(2.85) = 3rd of 3
  EXPECT_DOUBLE_EQ(median(twenty), 10.5);                               // (10 + 11) / 2
  EXPECT_EQ(median(std::vector<double>{0.1, 0.2}), 0.5 * (0.1 + 0.2));  // bit for bit: 0.5 * sum of the middle two
  EXPECT_DOUBLE_EQ(median_or_zero(std::vector<double>{}), 0.0);
  EXPECT_DOUBLE_EQ(median_or_zero(std::vector<double>{2, 4}), 3.0);
}

TEST(Stats, SummarizeByHand) {
  const std::vector<double> v = {10, 50, 20, 40, 30, 1000};
  const Stats s = summarize(v);
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 1000);
  EXPECT_DOUBLE_EQ(s.median, 35);          // sorted 10 20 30 40 50 1000: (30 + 40) / 2
  EXPECT_NEAR(s.mean, 1150.0 / 6, 1e-12);  // 191.67
  // Nearest rank, as result.json's step_ms_p95: ceil(0.95 * 6) = 6th of 6 = the outlier itself. (Linear
  // interpolation, the report's former p95, gave 762.5; issue 11 left one definition.)
  EXPECT_DOUBLE_EQ(s.p95, 1000);
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
