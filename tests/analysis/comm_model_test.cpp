// comm_model_test.cpp: the α-β-γ collective formulas against hand-computed cases (p = 1, 2, 3, 4; ring vs
// Gloo's all-reduce-based reduce-scatter), the JSON round trip, and errors that name the source and key.
#include "analysis/cost/comm_model.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace dtlab::analysis {
namespace {

// α = 10 us, β = 1e-3 us/B (1 GB/s), γ = 5e-4 us/B for every key.
CommModel uniform_model() {
  CommModel m;
  m.backend = "gloo";
  for (const char* key : {"all_reduce/backend", "all_reduce/ring", "reduce_scatter/backend", "reduce_scatter/ring",
                          "all_gather/backend", "all_gather/ring", "broadcast/backend", "send_recv/backend"})
    m.ops[key] = {10.0, 1e-3, 5e-4};
  return m;
}

TEST(CommModel, AllReduceRingHandComputed) {
  const CommModel m = uniform_model();
  const int64_t s = 1'000'000;
  // p = 2: 2·1·10 + 2·(1/2)·1e6·1e-3 + (1/2)·1e6·5e-4 = 20 + 1000 + 250
  EXPECT_NEAR(collective_time_us(m, "all_reduce", "backend", s, 2), 1270.0, 1e-9);
  // p = 4: 2·3·10 + 2·(3/4)·1e6·1e-3 + (3/4)·1e6·5e-4 = 60 + 1500 + 375
  EXPECT_NEAR(collective_time_us(m, "all_reduce", "backend", s, 4), 1935.0, 1e-9);
  EXPECT_NEAR(collective_time_us(m, "all_reduce", "ring", s, 4), 1935.0, 1e-9);
}

TEST(CommModel, ReduceScatterRingVersusGlooBackend) {
  const CommModel m = uniform_model();
  const int64_t s = 1'000'000;
  // ring, p = 4: 3·10 + (3/4)·1e6·(1e-3 + 5e-4) = 30 + 1125
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "ring", s, 4), 1155.0, 1e-9);
  // Gloo's backend runs a whole all-reduce: the all-reduce figure, about twice the bytes of the ring.
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "backend", s, 4), 1935.0, 1e-9);
  // p = 2: ring 10 + 0.5e6·1.5e-3 = 760; backend 1270.
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "ring", s, 2), 760.0, 1e-9);
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "backend", s, 2), 1270.0, 1e-9);
}

TEST(CommModel, AllGatherBroadcastSendRecvHandComputed) {
  const CommModel m = uniform_model();
  const int64_t s = 1'000'000;
  EXPECT_NEAR(collective_time_us(m, "all_gather", "ring", s, 4), 30.0 + 750.0, 1e-9);     // 3α + 3/4·Sβ
  EXPECT_NEAR(collective_time_us(m, "all_gather", "backend", s, 2), 10.0 + 500.0, 1e-9);  // α + 1/2·Sβ
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 2), 1010.0, 1e-9);         // 1·(α + Sβ)
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 3), 2020.0, 1e-9);         // ⌈log2 3⌉ = 2 levels
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 4), 2020.0, 1e-9);
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 5), 3030.0, 1e-9);
  EXPECT_NEAR(collective_time_us(m, "send_recv", "backend", s, 2), 1010.0, 1e-9);
}

TEST(CommModel, OneRankCostsNothing) {
  const CommModel m = uniform_model();
  for (const auto& [key, cost] : m.ops) {
    const auto slash = key.find('/');
    EXPECT_EQ(collective_time_us(m, key.substr(0, slash), key.substr(slash + 1), 1 << 20, 1), 0.0) << key;
  }
}

TEST(CommModel, JsonRoundTrip) {
  CommModel m = uniform_model();
  m.ops["all_reduce/backend"] = {12.5, 2.5e-4, 1.25e-4};
  const nlohmann::json j = m.to_json();
  EXPECT_EQ(j["backend"], "gloo");
  EXPECT_DOUBLE_EQ(j["ops"]["all_reduce/backend"]["alpha_us"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["ops"]["all_reduce/backend"]["beta_us_per_byte"].get<double>(), 2.5e-4);
  EXPECT_DOUBLE_EQ(j["ops"]["all_reduce/backend"]["gamma_us_per_byte"].get<double>(), 1.25e-4);
  const CommModel back = CommModel::from_json(nlohmann::json::parse(j.dump()), "<text>");
  EXPECT_EQ(back.backend, "gloo");
  ASSERT_EQ(back.ops.size(), m.ops.size());
  EXPECT_DOUBLE_EQ(back.ops.at("all_reduce/backend").gamma_us_per_byte, 1.25e-4);
}

TEST(CommModel, LargeMessageRegimeFromItsSizeOn) {
  CommModel m = uniform_model();
  CollectiveCost& c = m.ops["all_gather/ring"];
  c.large_from_bytes = 4 << 20;
  c.large_alpha_us = 100;
  c.large_beta_us_per_byte = 3e-3;
  const int64_t below = (4 << 20) - 4, from = 4 << 20;
  EXPECT_NEAR(collective_time_us(m, "all_gather", "ring", below, 2), 10 + 0.5 * below * 1e-3, 1e-9);
  EXPECT_NEAR(collective_time_us(m, "all_gather", "ring", from, 2), 100 + 0.5 * from * 3e-3, 1e-9);
  const nlohmann::json j = m.to_json();
  EXPECT_EQ(j["ops"]["all_gather/ring"]["large"]["from_bytes"], 4 << 20);
  EXPECT_FALSE(j["ops"]["all_gather/backend"].contains("large"));
  const CommModel back = CommModel::from_json(j, "<text>");
  EXPECT_EQ(back.ops.at("all_gather/ring").large_from_bytes, 4 << 20);
  EXPECT_DOUBLE_EQ(back.ops.at("all_gather/ring").large_beta_us_per_byte, 3e-3);
  nlohmann::json bad = j;
  bad["ops"]["all_gather/ring"]["large"].erase("from_bytes");
  const std::string msg = testing::message_of([&] { CommModel::from_json(bad, "m.json"); });
  EXPECT_NE(msg.find("ops.all_gather/ring.large.from_bytes"), std::string::npos) << msg;
}

TEST(CommModel, FromJsonErrorsNameSourceAndKey) {
  nlohmann::json j = uniform_model().to_json();
  j["ops"]["all_gather/ring"].erase("beta_us_per_byte");
  std::string msg = testing::message_of([&] { CommModel::from_json(j, "profile.json"); });
  EXPECT_NE(msg.find("profile.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ops.all_gather/ring.beta_us_per_byte"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;

  j = uniform_model().to_json();
  j["ops"]["all_reduce/backend"]["alpha_us"] = -1.0;
  msg = testing::message_of([&] { CommModel::from_json(j, "m.json"); });
  EXPECT_NE(msg.find("ops.all_reduce/backend.alpha_us"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">= 0"), std::string::npos) << msg;

  j = uniform_model().to_json();
  j["ops"]["all_reduce/backend"]["alpha_us"] = "fast";
  msg = testing::message_of([&] { CommModel::from_json(j, "m.json"); });
  EXPECT_NE(msg.find("must be a number"), std::string::npos) << msg;

  j = uniform_model().to_json();
  j["ops"]["all_to_all/backend"] = {{"alpha_us", 1}, {"beta_us_per_byte", 1}, {"gamma_us_per_byte", 0}};
  msg = testing::message_of([&] { CommModel::from_json(j, "m.json"); });
  EXPECT_NE(msg.find("all_to_all/backend"), std::string::npos) << msg;

  j = uniform_model().to_json();
  j["ops"]["allreduce"] = {{"alpha_us", 1}, {"beta_us_per_byte", 1}, {"gamma_us_per_byte", 0}};
  msg = testing::message_of([&] { CommModel::from_json(j, "m.json"); });
  EXPECT_NE(msg.find("ops.allreduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<op>/<algorithm>"), std::string::npos) << msg;

  msg = testing::message_of([&] { CommModel::from_json(nlohmann::json{{"ops", nlohmann::json::object()}}, "m.json"); });
  EXPECT_NE(msg.find("m.json: backend"), std::string::npos) << msg;
  msg = testing::message_of([&] { CommModel::from_json(nlohmann::json{{"backend", "gloo"}}, "m.json"); });
  EXPECT_NE(msg.find("m.json: ops"), std::string::npos) << msg;
}

TEST(CommModel, MissingKeyOrUnknownPairIsNamed) {
  CommModel m;
  m.backend = "gloo";
  m.ops["all_gather/ring"] = {1, 1e-3, 0};
  std::string msg = testing::message_of([&] { collective_time_us(m, "all_reduce", "backend", 1024, 2); });
  EXPECT_NE(msg.find("all_reduce/backend"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all_gather/ring"), std::string::npos) << msg;  // what the model does have
  msg = testing::message_of([&] { collective_time_us(m, "broadcast", "ring", 1024, 2); });
  EXPECT_NE(msg.find("broadcast/ring"), std::string::npos) << msg;
  msg = testing::message_of([&] { collective_time_us(m, "all_gather", "tree", 1024, 2); });
  EXPECT_NE(msg.find("'tree'"), std::string::npos) << msg;
  msg = testing::message_of([&] { collective_time_us(m, "all_gather", "ring", 1024, 0); });
  EXPECT_NE(msg.find("group_size"), std::string::npos) << msg;
}

TEST(CommModel, FromDocumentAcceptsModelOrMachineProfile) {
  const nlohmann::json model = uniform_model().to_json();
  EXPECT_EQ(comm_model_from_document(model, "m.json").ops.size(), 8u);
  const nlohmann::json profile = {{"name", "cpu"}, {"comm", {{"ranks_per_node", 2}, {"intra_node", model}}}};
  EXPECT_EQ(comm_model_from_document(profile, "p.json").ops.size(), 8u);
  const std::string msg = testing::message_of([&] {
    comm_model_from_document(nlohmann::json{{"name", "x"}}, "x.json");
  });
  EXPECT_NE(msg.find("x.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("comm.intra_node"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dtlab::analysis
