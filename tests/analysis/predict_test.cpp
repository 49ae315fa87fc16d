// predict_test.cpp: the prediction JSON's keys and labels, projections of `7b` on 64..1024 GPUs with the
// shipped H100 profile, and machine-profile files (round trip, errors that name file and key).
#include <gtest/gtest.h>

#include <fstream>

#include "analysis/cost/predict.hpp"
#include "analysis/cost/profile.hpp"
#include "lab/config.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

std::string shipped(const std::string& name) { return std::string(DTLAB_SOURCE_DIR) + "/analysis/profiles/" + name; }

std::vector<std::string> keys_of(const nlohmann::json& j) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

Config seven_b(int64_t world) {
  return load_config_text(
      "",
      {"model.preset=7b", "parallel.strategy=fsdp_full_shard", "precision.param_dtype=bf16",
       "precision.reduce_dtype=bf16", "train.micro_batch=1", "train.global_batch=" + std::to_string(world)},
      world);
}

TEST(Predict, KeysAreExactlyTheDocumentedOnes) {
  const Config c = load_config_text("", {"parallel.strategy=ddp", "train.global_batch=8", "train.micro_batch=4"}, 2);
  const MachineProfile p = load_profile(shipped("h100_sxm.json"));
  for (const MachineProfile* profile : {static_cast<const MachineProfile*>(nullptr), &p}) {
    const nlohmann::json j = predict(c, profile);
    EXPECT_EQ(keys_of(j), sorted(prediction_keys()));
    EXPECT_EQ(keys_of(j["memory_bytes"]),
              sorted({"params", "grads", "optimizer", "buffers", "activations", "logits", "peak"}));
    EXPECT_EQ(keys_of(j["comm"]), sorted({"bytes_per_step", "time_ms", "exposed_ms", "by_op"}));
    ASSERT_FALSE(j["comm"]["by_op"].empty());
    EXPECT_EQ(keys_of(j["comm"]["by_op"][0]),
              sorted({"op", "algorithm", "dtype", "group_size", "count", "bytes_per_step", "time_ms"}));
    EXPECT_EQ(j["world_size"], 2);
    EXPECT_EQ(j["strategy"], "ddp");
    const auto& m = j["memory_bytes"];
    EXPECT_EQ(m["peak"].get<int64_t>(), m["params"].get<int64_t>() + m["grads"].get<int64_t>() +
                                            m["optimizer"].get<int64_t>() + m["buffers"].get<int64_t>() +
                                            m["activations"].get<int64_t>() + m["logits"].get<int64_t>());
  }
}

TEST(Predict, WithoutProfileTimesAreNull) {
  const nlohmann::json j = predict(load_config_text("", {}, 1), nullptr);
  EXPECT_EQ(j["label"], "prediction");
  EXPECT_TRUE(j["profile"].is_null());
  EXPECT_TRUE(j["profile_kind"].is_null());
  for (const char* key : {"compute_ms", "optimizer_ms", "offload_ms", "step_ms", "tokens_per_s"})
    EXPECT_TRUE(j[key].is_null()) << key;
  EXPECT_TRUE(j["comm"]["time_ms"].is_null());
  EXPECT_GT(j["memory_bytes"]["peak"].get<int64_t>(), 0);
  EXPECT_GT(j["flops_per_token"].get<double>(), 0);
}

TEST(Predict, SevenBOnSixtyFourToThousandGpusIsAProjection) {
  const MachineProfile h100 = load_profile(shipped("h100_sxm.json"));
  double previous_params = 0;
  for (int64_t world : {64, 128, 256, 512, 1024}) {
    const nlohmann::json j = predict(seven_b(world), &h100);
    EXPECT_EQ(j["label"], "projection") << world;
    EXPECT_EQ(j["profile_kind"], "spec-sheet");
    EXPECT_GT(j["step_ms"].get<double>(), 0) << world;
    EXPECT_GT(j["comm"]["exposed_ms"].get<double>(), 0) << world;
    // Sharded parameters shrink with the world: fp32 master shard of ~6.7B / world.
    const double params = j["memory_bytes"]["params"].get<double>();
    if (previous_params > 0) {
      EXPECT_LT(params, previous_params) << world;
    }
    previous_params = params;
    EXPECT_NEAR(params, 4.0 * 6.74e9 / static_cast<double>(world), 0.02 * 4.0 * 6.74e9 / static_cast<double>(world));
  }
}

TEST(Predict, MeasuredProfileWithinItsWorldIsAPrediction) {
  MachineProfile p = load_profile(shipped("h100_sxm.json"));
  p.kind = "measured";
  p.comm.measured_world_size = 2;
  const Config two =
      load_config_text("", {"parallel.strategy=zero1", "train.global_batch=8", "train.micro_batch=4"}, 2);
  EXPECT_EQ(predict(two, &p)["label"], "prediction");
  const Config four =
      load_config_text("", {"parallel.strategy=zero1", "train.global_batch=8", "train.micro_batch=2"}, 4);
  EXPECT_EQ(predict(four, &p)["label"], "projection");
}

TEST(Predict, RankOutsideTheWorldIsAnError) {
  EXPECT_THROW(predict(load_config_text("", {}, 1), nullptr, 1), std::invalid_argument);
}

TEST(Profile, ShippedProfilesLoadAndRoundTrip) {
  for (const char* name : {"h100_sxm.json", "h200_sxm.json"}) {
    const MachineProfile p = load_profile(shipped(name));
    EXPECT_EQ(p.kind, "spec-sheet");
    EXPECT_EQ(p.comm.ranks_per_node, 8);
    EXPECT_TRUE(p.comm.inter_node.has_value());
    EXPECT_DOUBLE_EQ(matmul_tflops_for(p, "bf16"), 989.0);
    const MachineProfile again = MachineProfile::from_json(p.to_json(), "<round trip>");
    EXPECT_EQ(again.to_json(), p.to_json());
  }
}

TEST(Profile, ErrorsNameTheFileAndTheKey) {
  testing::TempDir dir;
  nlohmann::json j = load_profile(shipped("h100_sxm.json")).to_json();
  j["compute"].erase("memory_GBps");
  const std::string path = (dir.path() / "broken.json").string();
  testing::write_text(path, j.dump());
  try {
    load_profile(path);
    FAIL() << "expected ProfileError";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("compute.memory_GBps"), std::string::npos) << e.what();
  }
  j = load_profile(shipped("h100_sxm.json")).to_json();
  j["comm"]["intra_node"]["ops"]["all_reduce/backend"].erase("alpha_us");
  testing::write_text(path, j.dump());
  try {
    load_profile(path);
    FAIL() << "expected ProfileError";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find("comm.intra_node"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("alpha_us"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_profile((dir.path() / "missing.json").string()), ProfileError);
}

TEST(Profile, FallsBackToFloat32Rate) {
  MachineProfile p = load_profile(shipped("h100_sxm.json"));
  p.compute.matmul_tflops = {{"float32", 2.0}};
  bool fell_back = false;
  EXPECT_DOUBLE_EQ(matmul_tflops_for(p, "bf16", &fell_back), 2.0);
  EXPECT_TRUE(fell_back);
}

}  // namespace
}  // namespace dtlab::analysis
