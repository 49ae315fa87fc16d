// comm_model_test.cpp: the α-β-γ collective formulas against hand-computed cases (p = 1, 2, 3, 4; ring vs
// Gloo's all-reduce-based reduce-scatter; each key with its own coefficients, so a wrong look-up shows), the JSON
// round trip, and errors that name the source and key.
#include "analysis/cost/comm_model.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace dtlab::analysis {
namespace {

// Every key its own α (us), β (us/B) and γ (us/B), so a look-up of the wrong key changes the result.
CommModel distinct_model() {
  CommModel m;
  m.backend = "gloo";
  m.ops["all_reduce/backend"] = {10.0, 1e-3, 5e-4};
  m.ops["all_reduce/ring"] = {20.0, 2e-3, 6e-4};
  m.ops["reduce_scatter/backend"] = {30.0, 3e-3, 7e-4};
  m.ops["reduce_scatter/ring"] = {40.0, 4e-3, 8e-4};
  m.ops["all_gather/backend"] = {50.0, 5e-3, 9e-4};  // γ unused by a gather: a shape that used it would show
  m.ops["all_gather/ring"] = {60.0, 6e-3, 1e-4};
  m.ops["broadcast/backend"] = {70.0, 7e-3, 2e-4};
  m.ops["send_recv/backend"] = {80.0, 8e-3, 3e-4};
  return m;
}

TEST(CommModel, AllReduceRingHandComputed) {
  const CommModel m = distinct_model();
  const int64_t s = 1'000'000;
  // backend, p = 2: 2·1·10 + 2·(1/2)·1e6·1e-3 + (1/2)·1e6·5e-4 = 20 + 1000 + 250
  EXPECT_NEAR(collective_time_us(m, "all_reduce", "backend", s, 2), 1270.0, 1e-9);
  // backend, p = 4: 2·3·10 + 2·(3/4)·1e6·1e-3 + (3/4)·1e6·5e-4 = 60 + 1500 + 375
  EXPECT_NEAR(collective_time_us(m, "all_reduce", "backend", s, 4), 1935.0, 1e-9);
  // ring, p = 4: 2·3·20 + 2·(3/4)·1e6·2e-3 + (3/4)·1e6·6e-4 = 120 + 3000 + 450
  EXPECT_NEAR(collective_time_us(m, "all_reduce", "ring", s, 4), 3570.0, 1e-9);
}

TEST(CommModel, ReduceScatterRingVersusGlooBackend) {
  const CommModel m = distinct_model();
  const int64_t s = 1'000'000;
  // ring, p = 4: 3·40 + (3/4)·1e6·(4e-3 + 8e-4) = 120 + 3600
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "ring", s, 4), 3720.0, 1e-9);
  // Gloo's backend runs a whole all-reduce, with reduce_scatter/backend's own coefficients:
  // 2·3·30 + 2·(3/4)·1e6·3e-3 + (3/4)·1e6·7e-4 = 180 + 4500 + 525
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "backend", s, 4), 5205.0, 1e-9);
  // p = 2: ring 40 + (1/2)·1e6·4.8e-3 = 40 + 2400; backend 2·30 + 1e6·3e-3 + (1/2)·1e6·7e-4 = 60 + 3000 + 350.
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "ring", s, 2), 2440.0, 1e-9);
  EXPECT_NEAR(collective_time_us(m, "reduce_scatter", "backend", s, 2), 3410.0, 1e-9);
}

TEST(CommModel, AllGatherBroadcastSendRecvHandComputed) {
  const CommModel m = distinct_model();
  const int64_t s = 1'000'000;
  EXPECT_NEAR(collective_time_us(m, "all_gather", "ring", s, 4), 180.0 + 4500.0, 1e-9);    // 3·60 + 3/4·1e6·6e-3
  EXPECT_NEAR(collective_time_us(m, "all_gather", "backend", s, 2), 50.0 + 2500.0, 1e-9);  // 50 + 1/2·1e6·5e-3
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 2), 7070.0, 1e-9);          // 1·(70 + 1e6·7e-3)
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 3), 14140.0, 1e-9);         // ⌈log2 3⌉ = 2 levels
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 4), 14140.0, 1e-9);         // 2 levels
  EXPECT_NEAR(collective_time_us(m, "broadcast", "backend", s, 5), 21210.0, 1e-9);         // 3 levels
  EXPECT_NEAR(collective_time_us(m, "send_recv", "backend", s, 2), 8080.0, 1e-9);          // 80 + 1e6·8e-3
}

TEST(CommModel, OneRankCostsNothing) {
  const CommModel m = distinct_model();
  for (const auto& [key, cost] : m.ops) {
    const auto slash = key.find('/');
    EXPECT_EQ(collective_time_us(m, key.substr(0, slash), key.substr(slash + 1), 1 << 20, 1), 0.0) << key;
  }
}

TEST(CommModel, JsonRoundTrip) {
  CommModel m = distinct_model();
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
  EXPECT_DOUBLE_EQ(back.ops.at("broadcast/backend").alpha_us, 70.0);  // every key keeps its own figures
  EXPECT_DOUBLE_EQ(back.ops.at("reduce_scatter/ring").gamma_us_per_byte, 8e-4);
  EXPECT_EQ(back.to_json(), j);
}

TEST(CommModel, OverlapHiddenIsOptionalAndAFraction) {
  CommModel m = distinct_model();
  EXPECT_FALSE(m.to_json().contains("overlap_hidden"));  // absent stays absent: the schedules' assumption holds
  EXPECT_FALSE(CommModel::from_json(m.to_json(), "<text>").overlap_hidden.has_value());
  m.overlap_hidden = 0.125;
  const CommModel back = CommModel::from_json(nlohmann::json::parse(m.to_json().dump()), "<text>");
  ASSERT_TRUE(back.overlap_hidden.has_value());
  EXPECT_DOUBLE_EQ(*back.overlap_hidden, 0.125);
  EXPECT_EQ(back.overlap_bytes, CommModel::kOverlapLineBytes);  // the call it was measured at, with it
  m.overlap_bytes = 1 << 20;
  m.overlap_ranks = 4;
  const CommModel call = CommModel::from_json(m.to_json(), "<text>");
  EXPECT_EQ(call.overlap_bytes, 1 << 20);
  EXPECT_EQ(call.overlap_ranks, 4);
  nlohmann::json older = m.to_json();  // a profile written before the call was recorded: 4 MiB over 2 ranks
  older.erase("overlap_bytes");
  older.erase("overlap_ranks");
  EXPECT_EQ(CommModel::from_json(older, "<text>").overlap_bytes, CommModel::kOverlapLineBytes);
  EXPECT_EQ(CommModel::from_json(older, "<text>").overlap_ranks, 2);
  nlohmann::json orphan = distinct_model().to_json();  // a call without a fraction measured at it
  orphan["overlap_bytes"] = 1024;
  std::string orphan_msg = testing::message_of([&] { CommModel::from_json(orphan, "profile.json"); });
  EXPECT_NE(orphan_msg.find("profile.json: overlap_bytes without overlap_hidden"), std::string::npos) << orphan_msg;
  nlohmann::json one_rank = m.to_json();
  one_rank["overlap_ranks"] = 1;
  orphan_msg = testing::message_of([&] { CommModel::from_json(one_rank, "profile.json"); });
  EXPECT_NE(orphan_msg.find("profile.json: overlap_ranks: must be a whole number >= 2, got 1"), std::string::npos)
      << orphan_msg;

  for (const nlohmann::json& bad : {nlohmann::json(1.5), nlohmann::json(-1.1), nlohmann::json("most")}) {
    nlohmann::json j = m.to_json();
    j["overlap_hidden"] = bad;
    const std::string msg = testing::message_of([&] { CommModel::from_json(j, "profile.json"); });
    EXPECT_NE(msg.find("profile.json: overlap_hidden"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[-1, 1]"), std::string::npos) << msg;
  }
  // Below 0: overlapping measured slower than taking turns (CPU ranks whose cores Gloo's threads share).
  m.overlap_hidden = -0.25;
  EXPECT_DOUBLE_EQ(*CommModel::from_json(m.to_json(), "<text>").overlap_hidden, -0.25);
}

TEST(CommModel, LargeMessageRegimeFromItsSizeOn) {
  CommModel m = distinct_model();
  CollectiveCost& c = m.ops["all_gather/ring"];
  c.large_from_bytes = 4 << 20;
  c.large_alpha_us = 100;
  c.large_beta_us_per_byte = 3e-3;
  const int64_t below = (4 << 20) - 4, from = 4 << 20;
  // below: 60 + (1/2)·4 194 300·6e-3 = 60 + 12 582.9; from: 100 + (1/2)·4 194 304·3e-3 = 100 + 6 291.456
  EXPECT_NEAR(collective_time_us(m, "all_gather", "ring", below, 2), 12642.9, 1e-6);
  EXPECT_NEAR(collective_time_us(m, "all_gather", "ring", from, 2), 6391.456, 1e-6);
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
  nlohmann::json j = distinct_model().to_json();
  j["ops"]["all_gather/ring"].erase("beta_us_per_byte");
  std::string msg = testing::message_of([&] { CommModel::from_json(j, "profile.json"); });
  EXPECT_NE(msg.find("profile.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ops.all_gather/ring.beta_us_per_byte"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;

  j = distinct_model().to_json();
  j["ops"]["all_reduce/backend"]["alpha_us"] = -1.0;
  msg = testing::message_of([&] { CommModel::from_json(j, "m.json"); });
  EXPECT_NE(msg.find("ops.all_reduce/backend.alpha_us"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">= 0"), std::string::npos) << msg;

  j = distinct_model().to_json();
  j["ops"]["all_reduce/backend"]["alpha_us"] = "fast";
  msg = testing::message_of([&] { CommModel::from_json(j, "m.json"); });
  EXPECT_NE(msg.find("must be a number"), std::string::npos) << msg;

  j = distinct_model().to_json();
  j["ops"]["all_to_all/ring"] = {{"alpha_us", 1}, {"beta_us_per_byte", 1}, {"gamma_us_per_byte", 0}};
  msg = testing::message_of([&] { CommModel::from_json(j, "m.json"); });
  EXPECT_NE(msg.find("all_to_all/ring"), std::string::npos) << msg;

  j = distinct_model().to_json();
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
  const nlohmann::json model = distinct_model().to_json();
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
