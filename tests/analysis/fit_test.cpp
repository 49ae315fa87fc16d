// fit_test.cpp: the least-squares fit recovers known α, β, γ from synthetic comm-bench documents (exact data and
// 2% multiplicative noise with a fixed seed; times from α-β-γ formulas written out in this file, not the model's),
// and documents without rows fail with a clear message; a real sweep across an emulated 1 Gbit/s link
// (fixtures/comm_bench) keeps its reducing ops' measured large-message times once floored at the wire time.
#include "analysis/cost/fit.hpp"
#include "analysis/cost/comm_model.hpp"
#include "analysis/cost/topology.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab::analysis {
namespace {

// Ground truth in the shape the fit can identify: the reducing ops share all_gather's β per algorithm family.
CommModel true_model() {
  CommModel m;
  m.backend = "gloo";
  m.ops["all_gather/backend"] = {40.0, 8e-4, 0};
  m.ops["all_gather/ring"] = {55.0, 9e-4, 0};
  m.ops["all_reduce/backend"] = {35.0, 8e-4, 6e-4};
  m.ops["reduce_scatter/backend"] = {38.0, 8e-4, 7e-4};
  m.ops["all_reduce/ring"] = {60.0, 9e-4, 5e-4};
  m.ops["reduce_scatter/ring"] = {58.0, 9e-4, 4e-4};
  m.ops["broadcast/backend"] = {30.0, 7e-4, 0};
  return m;
}

// The time of one call, written out here per op/algorithm from docs/cost-models.md "Formulas" (Thakur, Rabenseifner,
// Gropp 2005) rather than taken from comm_model.cpp, whose shapes the fit inverts: data made with the fit's own shapes
// would be recovered whatever those shapes were. p = world, S = bytes (lab/comm's convention).
double bench_time_us(const std::string& op, const std::string& algorithm, const CollectiveCost& c, double S, int p) {
  const double a = c.alpha_us, b = c.beta_us_per_byte, g = c.gamma_us_per_byte;
  if (op == "all_gather") return (p - 1) * a + (p - 1.0) / p * S * b;  // ring, Gloo's too
  if (op == "all_reduce") return 2 * (p - 1) * a + 2 * (p - 1.0) / p * S * b + (p - 1.0) / p * S * g;  // ring
  if (op == "reduce_scatter" && algorithm == "ring") return (p - 1) * a + (p - 1.0) / p * S * (b + g);
  if (op == "reduce_scatter" && algorithm == "backend")  // Gloo: a whole all-reduce, then one chunk
    return 2 * (p - 1) * a + 2 * (p - 1.0) / p * S * b + (p - 1.0) / p * S * g;
  if (op == "broadcast") return std::ceil(std::log2(p)) * (a + S * b);  // binomial tree
  ADD_FAILURE() << "no hand formula for " << op << "/" << algorithm;
  return 0;
}

// bench_time_us of `model`'s key "<op>/<algorithm>".
double true_time_us(const CommModel& model, const std::string& key, double S, int p) {
  const auto slash = key.find('/');
  return bench_time_us(key.substr(0, slash), key.substr(slash + 1), model.ops.at(key), S, p);
}

// A comm-bench JSON document with 1 KiB .. 256 MiB rows (factor 4) timed by `model` at `world` (bench_time_us),
// each time multiplied by (1 + noise), noise ~ N(0, noise_sd) from a fixed seed.
nlohmann::json synthetic_bench(const CommModel& model, int world, double noise_sd) {
  std::mt19937 rng(20240611);
  std::normal_distribution<double> noise(0.0, noise_sd);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [key, cost] : model.ops) {
    const auto slash = key.find('/');
    const std::string op = key.substr(0, slash), algorithm = key.substr(slash + 1);
    for (int64_t bytes = 1024; bytes <= (int64_t{256} << 20); bytes *= 4) {
      const double t = bench_time_us(op, algorithm, cost, static_cast<double>(bytes), world);
      auto figure = [&] {
        const double time_us = t * (1 + noise(rng));
        return nlohmann::json{{"time_us", time_us}, {"algbw_GBps", bytes / time_us * 1e-3}, {"wrong", 0}};
      };
      rows.push_back({{"op", op},
                      {"algorithm", algorithm},
                      {"bytes", bytes},
                      {"count", bytes / 4},
                      {"type", "float32"},
                      {"out_of_place", figure()},
                      {"in_place", figure()}});
    }
  }
  return {{"tool", "dtlab comm-bench"},
          {"backend", "gloo"},
          {"world_size", world},
          {"dtype", "float32"},
          {"results", rows}};
}

TEST(LinearFit, RecoversALineExactly) {
  const std::vector<double> x = {1, 2, 4, 8}, y = {3 + 2 * 1, 3 + 2 * 2, 3 + 2 * 4, 3 + 2 * 8}, w = {1, 2, 3, 4};
  const LinearFit fit = weighted_linear_fit(x, y, w);
  EXPECT_NEAR(fit.intercept, 3.0, 1e-12);
  EXPECT_NEAR(fit.slope, 2.0, 1e-12);
  const LinearFit rel = relative_linear_fit(x, y);
  EXPECT_NEAR(rel.intercept, 3.0, 1e-12);
  EXPECT_NEAR(rel.slope, 2.0, 1e-12);
}

TEST(LinearFit, WeightsPullTowardsHeavyPoints) {
  // Two exact points on y = x and one outlier: with a tiny weight the outlier barely moves the line.
  const std::vector<double> x = {1, 2, 3}, y = {1, 2, 30};
  const LinearFit light = weighted_linear_fit(x, y, std::vector<double>{1, 1, 1e-9});
  EXPECT_NEAR(light.slope, 1.0, 1e-6);
  const LinearFit heavy = weighted_linear_fit(x, y, std::vector<double>{1, 1, 1});
  EXPECT_GT(heavy.slope, 10.0);
}

TEST(LinearFit, NegativeInterceptIsRefittedThroughTheOrigin) {
  const std::vector<double> x = {1, 2, 3, 4}, y = {0.5, 1.9, 3.1, 4.2};  // best line crosses below zero
  const LinearFit fit = relative_linear_fit(x, y);
  EXPECT_EQ(fit.intercept, 0.0);
  std::vector<double> w;
  for (double yi : y) w.push_back(1 / (yi * yi));
  EXPECT_NEAR(fit.slope, weighted_fit_through_origin(x, y, w).slope, 1e-12);
  EXPECT_GT(fit.slope, 0.5);  // between the small point's ratio (0.5) and the large ones' (~1.05)
  EXPECT_LT(fit.slope, 1.1);
}

TEST(LinearFit, RobustFitIgnoresSchedulerOutliers) {
  // 50 us + 1 ns/B, with two rows that waited ~2 ms for a core: a plain relative fit lands ~3% off (intercept 51.4),
  // the bisquare reweighting drops them and recovers the line within 1%.
  std::vector<double> x, y;
  for (int i = 0; i < 10; ++i) {
    x.push_back(1024.0 * std::pow(4.0, i));
    y.push_back(50 + 1e-3 * x.back());
  }
  y[1] += 2000;
  y[3] += 2000;
  EXPECT_GT(std::fabs(relative_linear_fit(x, y).intercept - 50), 0.5);
  const LinearFit robust = robust_relative_fit(x, y);
  EXPECT_NEAR(robust.intercept, 50, 0.5);
  EXPECT_NEAR(robust.slope, 1e-3, 1e-6);
}

TEST(LinearFit, TwoSizeRegimesWhenOneLineCannotFit) {
  // Cache-resident small messages at 1e-4 us/B, large ones at 3e-4 us/B from 4 MiB on.
  std::vector<double> x, y;
  for (int i = 0; i < 10; ++i) {
    x.push_back(1024.0 * std::pow(4.0, i));
    y.push_back(x.back() < (4 << 20) ? 30 + 1e-4 * x.back() : 200 + 3e-4 * x.back());
  }
  const SizeRegimes r = fit_size_regimes(x, y);
  EXPECT_EQ(r.from_x, 4 << 20);
  EXPECT_NEAR(r.below.intercept, 30, 1e-6);
  EXPECT_NEAR(r.below.slope, 1e-4, 1e-12);
  EXPECT_NEAR(r.from.intercept, 200, 1e-3);
  EXPECT_NEAR(r.from.slope, 3e-4, 1e-12);
  // One straight line stays one line.
  std::vector<double> straight;
  for (double xi : x) straight.push_back(30 + 1e-4 * xi);
  EXPECT_EQ(fit_size_regimes(x, straight).from_x, 0);
}

// A real sweep across an emulated 1 Gbit/s link (fixtures/comm_bench/inter_node_1gbit.json: the cluster calibration
// of `make benchmark` on 2026-11-28, an EPYC with its kernels held to AVX2), fitted and floored at the link's wire
// time as `dtlab calibrate` does. Its all_reduce/backend rows run at the wire rate, but the all-gather's β the fit
// split them with was below it: γ took the rest of the slope, and raising β alone then predicted a 16 MiB
// all-reduce at 211 ms against 139 ms measured, with the excess kept as γ at every faster link (the crossover
// study's prediction at 16 Gbit/s was mostly that). The reducing ops must reproduce their large rows.
TEST(CommFit, AReducingOpFlooredAtTheWireTimeKeepsItsMeasuredTime) {
  const nlohmann::json doc = nlohmann::json::parse(
      testing::read_text(std::filesystem::path(testing::fixtures_dir()) / "comm_bench/inter_node_1gbit.json"));
  CommModel m = fit_comm_model(doc);
  ASSERT_GT(floor_betas(m, wire_us_per_byte(1e9)), 0) << "the case under test: some fitted β below the wire time";
  const int p = doc.at("group_size").get<int>();
  int checked = 0;
  for (const nlohmann::json& row : doc.at("results")) {
    const double bytes = row.at("bytes").get<double>();
    const std::string op = row.at("op"), algorithm = row.at("algorithm");
    if (bytes < (1 << 20) || cost_shape(op, algorithm, 1, p).gamma == 0) continue;
    if (op == "reduce_scatter" && algorithm == "ring") continue;  // its 1/4/16 MiB rows are not on one line
    const double measured = row.at(fitted_placement(op)).at("time_us").get<double>();
    const double predicted = collective_time_us(m, op, algorithm, static_cast<int64_t>(bytes), p);
    EXPECT_NEAR(predicted / measured, 1.0, 0.10) << op << "/" << algorithm << " at " << bytes << " B";
    ++checked;
  }
  EXPECT_EQ(checked, 9) << "all_reduce/backend, all_reduce/ring and reduce_scatter/backend at 1, 4 and 16 MiB";
}

// Flooring a reducing op's β at the wire time takes what the β adds out of γ, so the time the fit measured stays; γ
// never goes below 0, and an op without γ just gets the floor.
TEST(CommFit, FlooringBetaGivesTheAddedTimeBackFromGamma) {
  CommModel m;
  m.ops["all_reduce/backend"] = {766.0, 0.006, 0.0089};  // β below a 1 Gbit/s wire (0.008 us/B), γ took the rest
  m.ops["reduce_scatter/ring"] = {234.0, 0.002, 0.001};  // more to add than γ holds
  m.ops["all_gather/ring"] = {227.0, 0.005, 0.0};
  const int64_t bytes = 16 << 20;
  const double before = collective_time_us(m, "all_reduce", "backend", bytes, 2);
  EXPECT_EQ(floor_betas(m, 0.008), 3);
  EXPECT_NEAR(collective_time_us(m, "all_reduce", "backend", bytes, 2), before, 1e-6 * before);
  EXPECT_DOUBLE_EQ(m.ops["all_reduce/backend"].beta_us_per_byte, 0.008);
  EXPECT_NEAR(m.ops["all_reduce/backend"].gamma_us_per_byte, 0.0089 - 2 * 0.002, 1e-12);
  EXPECT_EQ(m.ops["reduce_scatter/ring"].gamma_us_per_byte, 0.0);
  EXPECT_DOUBLE_EQ(m.ops["all_gather/ring"].beta_us_per_byte, 0.008);
}

TEST(LinearFit, RejectsDegenerateInput) {
  EXPECT_NE(testing::message_of([] {
              weighted_linear_fit(std::vector<double>{1, 1}, std::vector<double>{1, 2}, std::vector<double>{1, 1});
            }).find("two distinct x"),
            std::string::npos);
  EXPECT_NE(testing::message_of([] {
              weighted_linear_fit(std::vector<double>{1}, std::vector<double>{1}, std::vector<double>{1});
            }).find("at least 2 points"),
            std::string::npos);
  EXPECT_NE(testing::message_of([] {
              relative_linear_fit(std::vector<double>{1, 2}, std::vector<double>{1, 0});
            }).find("> 0"),
            std::string::npos);
}

TEST(FitCommModel, RecoversExactModel) {
  const CommModel truth = true_model();
  for (int world : {2, 3, 4}) {
    const CommModel fit = fit_comm_model(synthetic_bench(truth, world, 0.0));
    ASSERT_EQ(fit.ops.size(), truth.ops.size()) << "world " << world;
    for (const auto& [key, expected] : truth.ops) {
      const CollectiveCost& got = fit.ops.at(key);
      EXPECT_NEAR(got.alpha_us, expected.alpha_us, 1e-6 * expected.alpha_us) << key << " world " << world;
      EXPECT_NEAR(got.beta_us_per_byte, expected.beta_us_per_byte, 1e-9 * expected.beta_us_per_byte) << key;
      EXPECT_NEAR(got.gamma_us_per_byte, expected.gamma_us_per_byte, 1e-9 * expected.beta_us_per_byte) << key;
    }
  }
}

TEST(FitCommModel, RecoversModelFromNoisyDataWithinAFewPercent) {
  const CommModel truth = true_model();
  const CommModel fit = fit_comm_model(synthetic_bench(truth, 2, 0.02));
  for (const auto& [key, expected] : truth.ops) {
    const CollectiveCost& got = fit.ops.at(key);
    EXPECT_NEAR(got.alpha_us, expected.alpha_us, 0.05 * expected.alpha_us) << key;
    EXPECT_NEAR(got.beta_us_per_byte, expected.beta_us_per_byte, 0.03 * expected.beta_us_per_byte) << key;
    // γ is what is left of a reducing op's slope after β: its relative error is larger (slope error / share).
    EXPECT_NEAR(got.gamma_us_per_byte, expected.gamma_us_per_byte, 0.10 * expected.gamma_us_per_byte + 1e-12) << key;
    // What matters downstream: the predicted time of every measured size is within a few %.
    const auto slash = key.find('/');
    for (int64_t bytes = 1024; bytes <= (int64_t{256} << 20); bytes *= 4) {
      const double t_true = true_time_us(truth, key, static_cast<double>(bytes), 2);
      const double t_fit = collective_time_us(fit, key.substr(0, slash), key.substr(slash + 1), bytes, 2);
      EXPECT_NEAR(t_fit, t_true, 0.04 * t_true) << key << " at " << bytes << " B";
    }
  }
}

TEST(FitCommModel, ReducingOpFasterThanAllGatherKeepsItsOwnSlope) {
  // all_reduce's slope below 2·share·β_all_gather: γ clamps to 0 and β reproduces the all-reduce line.
  CommModel truth = true_model();
  truth.ops["all_reduce/backend"] = {35.0, 5e-4, 0};
  const CommModel fit = fit_comm_model(synthetic_bench(truth, 2, 0.0));
  EXPECT_EQ(fit.ops.at("all_reduce/backend").gamma_us_per_byte, 0.0);
  EXPECT_NEAR(fit.ops.at("all_reduce/backend").beta_us_per_byte, 5e-4, 1e-12);
}

TEST(FitCommModel, LargeMessageRegimeIsFittedPerKey) {
  // all_gather/ring 3x slower per byte from 4 MiB on: the model's large regime reproduces both lines.
  CommModel truth = true_model();
  nlohmann::json bench = synthetic_bench(truth, 2, 0.0);
  for (auto& row : bench["results"])
    if (row["op"] == "all_gather" && row["algorithm"] == "ring" && row["bytes"].get<int64_t>() >= (4 << 20))
      row["out_of_place"]["time_us"] = 55.0 + 3 * 9e-4 * 0.5 * row["bytes"].get<double>();
  const CommModel fit = fit_comm_model(bench);
  const CollectiveCost& c = fit.ops.at("all_gather/ring");
  EXPECT_EQ(c.large_from_bytes, 4 << 20);
  EXPECT_NEAR(c.beta_us_per_byte, 9e-4, 1e-12);
  EXPECT_NEAR(c.large_beta_us_per_byte, 3 * 9e-4, 1e-12);
  EXPECT_NEAR(collective_time_us(fit, "all_gather", "ring", 64 << 20, 2), 55.0 + 3 * 9e-4 * 0.5 * (64 << 20), 1e-3);
  EXPECT_NEAR(collective_time_us(fit, "all_gather", "ring", 1 << 20, 2), 55.0 + 9e-4 * 0.5 * (1 << 20), 1e-6);
  // The other keys stay one line.
  EXPECT_EQ(fit.ops.at("all_reduce/backend").large_from_bytes, 0);
}

TEST(FitCommModel, PointToPointBecomesSendRecv) {
  nlohmann::json bench = synthetic_bench(true_model(), 2, 0.0);
  bench["p2p"] = {{"bytes", 64 << 20}, {"time_us", 55.0 + (64 << 20) * 9e-4}, {"GBps", 1.1}};
  const CommModel fit = fit_comm_model(bench);
  ASSERT_EQ(fit.ops.count("send_recv/backend"), 1u);
  EXPECT_NEAR(fit.ops.at("send_recv/backend").alpha_us, 55.0, 1e-6);  // all_gather/ring's α per step
  EXPECT_NEAR(fit.ops.at("send_recv/backend").beta_us_per_byte, 9e-4, 1e-12);
}

TEST(FitCommModel, OverlapLineBecomesOverlapHidden) {
  nlohmann::json bench = synthetic_bench(true_model(), 2, 0.0);
  EXPECT_FALSE(fit_comm_model(bench).overlap_hidden.has_value());  // no line: nothing claimed
  bench["overlap"] = {{"bytes", 1 << 20},
                      {"comm_us", 3000.0},
                      {"compute_us", 3100.0},
                      {"together_us", 5800.0},
                      {"hidden_fraction", 0.1}};
  const CommModel fit = fit_comm_model(bench);
  ASSERT_TRUE(fit.overlap_hidden.has_value());
  EXPECT_DOUBLE_EQ(*fit.overlap_hidden, 0.1);
  EXPECT_EQ(fit.overlap_bytes, 1 << 20);  // the call it was measured at travels with it
  EXPECT_EQ(fit.overlap_ranks, 2);
  nlohmann::json four = synthetic_bench(true_model(), 4, 0.0);  // the line runs over the rows' group
  four["overlap"] = bench["overlap"];
  EXPECT_EQ(fit_comm_model(four).overlap_ranks, 4);
  bench["overlap"]["hidden_fraction"] = 1.2;
  const std::string msg = testing::message_of([&] { fit_comm_model(bench); });
  EXPECT_NE(msg.find("overlap.hidden_fraction"), std::string::npos) << msg;
}

TEST(FitCommModel, UsesTheFigureThatMatchesLabComm) {
  EXPECT_STREQ(fitted_placement("all_reduce"), "in_place");
  EXPECT_STREQ(fitted_placement("broadcast"), "in_place");
  EXPECT_STREQ(fitted_placement("all_gather"), "out_of_place");
  EXPECT_STREQ(fitted_placement("reduce_scatter"), "out_of_place");
  // An in-place figure twice as slow must change the all_reduce fit, and an out-of-place one must not.
  nlohmann::json bench = synthetic_bench(true_model(), 2, 0.0);
  for (auto& row : bench["results"])
    if (row["op"] == "all_reduce") row["out_of_place"]["time_us"] = row["out_of_place"]["time_us"].get<double>() * 2;
  EXPECT_NEAR(fit_comm_model(bench).ops.at("all_reduce/backend").alpha_us, 35.0, 1e-6);
}

TEST(FitCommModel, DocumentsWithoutRowsFailClearly) {
  std::string msg = testing::message_of([] { fit_comm_model(nlohmann::json{{"world_size", 2}}); });
  EXPECT_NE(msg.find("missing key 'results'"), std::string::npos) << msg;
  msg = testing::message_of([] {
    fit_comm_model(nlohmann::json{{"world_size", 2}, {"results", nlohmann::json::array()}});
  });
  EXPECT_NE(msg.find("no rows to fit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dtlab comm-bench"), std::string::npos) << msg;

  nlohmann::json bench = synthetic_bench(true_model(), 2, 0.0);
  bench.erase("world_size");
  msg = testing::message_of([&] { fit_comm_model(bench); });
  EXPECT_NE(msg.find("world_size"), std::string::npos) << msg;

  bench = synthetic_bench(true_model(), 2, 0.0);
  bench["results"][3].erase("in_place");  // an all_gather/backend row: in_place is not what it fits...
  bench["results"][3].erase("out_of_place");
  msg = testing::message_of([&] { fit_comm_model(bench); });
  EXPECT_NE(msg.find("results[3]"), std::string::npos) << msg;

  // One size for a key cannot separate α from β.
  nlohmann::json one = synthetic_bench(true_model(), 2, 0.0);
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& row : one["results"])
    if (row["op"] != "broadcast" || row["bytes"] == 1024) kept.push_back(row);
  one["results"] = kept;
  msg = testing::message_of([&] { fit_comm_model(one); });
  EXPECT_NE(msg.find("broadcast/backend"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fewer than two message sizes"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dtlab::analysis
