// step_model_test.cpp: the compute and step-time models against hand-computed cases on a synthetic profile
// (round numbers), the exposure rules per strategy, and the choice of intra- vs inter-node model.
#include <gtest/gtest.h>

#include "analysis/cost/comm_model.hpp"
#include "analysis/cost/compute_model.hpp"
#include "analysis/cost/step_model.hpp"
#include "lab/config.hpp"
#include "lab/model_shape.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {
namespace {

CommModel uniform_comm(double alpha_us, double beta_us_per_byte, double gamma_us_per_byte) {
  CommModel m;
  m.backend = "gloo";
  for (const char* key : {"all_reduce/backend", "all_gather/backend", "all_gather/ring", "reduce_scatter/ring",
                          "reduce_scatter/backend", "broadcast/backend", "send_recv/backend"})
    m.ops[key] = {alpha_us, beta_us_per_byte, gamma_us_per_byte};
  return m;
}

// 1 TFLOP/s fp32 at efficiency 0.5, 10 GB/s memory, two ranks per node.
MachineProfile synthetic(double alpha_us = 100, double beta = 1e-3, double gamma = 0) {
  MachineProfile p;
  p.name = "synthetic";
  p.kind = "measured";
  p.source = "test";
  p.device = "cpu";
  p.compute.matmul_tflops = {{"float32", 1.0}};
  p.compute.train_efficiency = 0.5;
  p.compute.memory_GBps = 10;
  p.comm.ranks_per_node = 2;
  p.comm.intra_node = uniform_comm(alpha_us, beta, gamma);
  return p;
}

Config tiny(std::vector<std::string> overrides = {}, int64_t world = 1) {
  overrides.insert(overrides.begin(), {"train.micro_batch=4", "train.global_batch=" + std::to_string(4 * world)});
  return load_config_text("", overrides, world);
}

double step_bytes_time_ms(const CostPlan& plan, const Config& c, const MachineProfile& p, const std::string& op) {
  double ms = 0;
  for (const auto& col : plan.collectives)
    if (col.phase != "setup" && col.op == op && col.bytes > 8)
      ms += planned_collective_us(col, c, p) / 1e3 * static_cast<double>(col.count);
  return ms;
}

TEST(ComputeModel, FlopsPerTokenIsSixNPlusAttention) {
  const Config c = tiny();
  EXPECT_DOUBLE_EQ(compute_flops(c).model_per_token, model_counts(c.model).flops_per_token);
  EXPECT_DOUBLE_EQ(compute_flops(c).recompute_per_token, 0.0);
  // Full recompute adds one forward of each block: 2·(block matmul params) + 4·h·s per token.
  const Config full = tiny({"parallel.activation_checkpointing=full"});
  const double block_matmul = 2 * 64.0 * 64 + 2 * 32.0 * 64 + 3 * 172.0 * 64;
  EXPECT_DOUBLE_EQ(compute_flops(full).recompute_per_token, 2 * (2 * block_matmul + 4 * 64.0 * 64));
  const Config selective = tiny({"parallel.activation_checkpointing=selective"});
  const double attention_matmul = 2 * 64.0 * 64 + 2 * 32.0 * 64;
  EXPECT_DOUBLE_EQ(compute_flops(selective).recompute_per_token, 2 * (2 * attention_matmul + 4 * 64.0 * 64));
}

TEST(ComputeModel, TimeIsTokensTimesFlopsOverAchievedRate) {
  const Config c = tiny();
  const ComputeTime t = compute_time(c, synthetic());
  const double tokens = 4 * 64;
  const double expected_ms = tokens * model_counts(c.model).flops_per_token / 0.5e12 * 1e3;
  EXPECT_DOUBLE_EQ(t.rate_tflops, 0.5);
  EXPECT_NEAR(t.step_ms, expected_ms, 1e-9 * expected_ms);
  EXPECT_NEAR(t.backward_ms, 2 * t.forward_ms, 1e-12);
}

TEST(ComputeModel, CpuRateScalesWithThreadsPerRank) {
  MachineProfile p = synthetic();
  p.compute.threads = 1;
  p.compute.cores = 2;
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({"train.threads=2"}), p), 1.0);     // 2 threads of 1-thread rates
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({}, 2), p), 0.5);                   // 2 ranks on 2 cores: 1 each
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({"train.threads=2"}, 2), p), 0.5);  // oversubscribed: still 1 core each
}

TEST(ComputeModel, PerDtypeEfficiencyWinsForItsDtype) {
  MachineProfile p = synthetic();
  p.compute.matmul_tflops["bfloat16"] = 4.0;
  p.compute.train_efficiency_by_dtype = {{"bfloat16", 0.125}};
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({"precision.param_dtype=bf16"}), p), 0.5);  // 4 x 0.125, not 4 x 0.5
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny(), p), 0.5);                                // fp32: the scalar 0.5
  EXPECT_DOUBLE_EQ(train_efficiency_for(p, "bf16"), 0.125);
  EXPECT_DOUBLE_EQ(train_efficiency_for(p, "float32"), 0.5);

  nlohmann::json j = p.to_json();
  EXPECT_DOUBLE_EQ(MachineProfile::from_json(j, "t").compute.train_efficiency_by_dtype.at("bfloat16"), 0.125);
  j["compute"]["train_efficiency_by_dtype"]["bfloat16"] = 1.5;
  try {
    MachineProfile::from_json(j, "p.json");
    FAIL() << "an efficiency above 1 must be refused";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find("train_efficiency_by_dtype"), std::string::npos) << e.what();
  }
}

TEST(StepModel, ElementwiseBytesAreWhatTheOptimizerPhaseIsTimedWith) {
  const Config c = tiny();
  const CostPlan plan = cost_plan(c, 0);
  const double numel = static_cast<double>(model_counts(c.model).params);
  EXPECT_DOUBLE_EQ(elementwise_bytes(c, plan), numel * (80 + 32));
  EXPECT_NEAR(predict_step(c, plan, synthetic()).optimizer_ms, elementwise_bytes(c, plan) / 10e9 * 1e3, 1e-9);
}

TEST(StepModel, SingleIsComputePlusOptimizer) {
  const Config c = tiny();
  const CostPlan plan = cost_plan(c, 0);
  const StepPrediction s = predict_step(c, plan, synthetic());
  const double numel = static_cast<double>(model_counts(c.model).params);
  // AdamW 80 bytes per element; gradient norm 12, clip 8, divide 8, zero 4 bytes per gradient; at 10 GB/s.
  EXPECT_NEAR(s.optimizer_ms, numel * (80 + 32) / 10e9 * 1e3, 1e-9);
  EXPECT_DOUBLE_EQ(s.exposed_comm_ms, 0.0);
  EXPECT_DOUBLE_EQ(s.step_ms, s.compute_ms + s.optimizer_ms);
  EXPECT_NEAR(s.tokens_per_s, 4 * 64 / (s.step_ms / 1e3), 1e-6);
}

TEST(StepModel, DdpBucketReadyAtTheEndOfBackwardIsExposed) {
  // tiny's gradients (494 848 bytes) fit the 1 MiB first bucket, which holds the embedding: its all-reduce can
  // start only when backward ends, so all of it is exposed, plus the trainer's loss all-reduce.
  const Config c = tiny({"parallel.strategy=ddp"}, 2);
  const CostPlan plan = cost_plan(c, 0);
  const MachineProfile p = synthetic();
  const StepPrediction s = predict_step(c, plan, p);
  const double bucket_ms = collective_time_us(p.comm.intra_node, "all_reduce", "backend", 494848, 2) / 1e3;
  const double loss_ms = collective_time_us(p.comm.intra_node, "all_reduce", "backend", 8, 2) / 1e3;
  EXPECT_NEAR(s.exposed_comm_ms, bucket_ms + loss_ms, 1e-9);
  EXPECT_NEAR(s.comm_ms, bucket_ms + loss_ms, 1e-9);
}

TEST(StepModel, DdpBucketsOverlapTheBackwardThatFollowsThem) {
  // Small buckets (cap 0.01 MB): all but the embedding's all-reduce can hide behind the rest of backward.
  const Config c = tiny({"parallel.strategy=ddp", "parallel.bucket_cap_mb=0.01"}, 2);
  MachineProfile p = synthetic(1, 1e-6);
  p.compute.matmul_tflops = {{"float32", 1e-3}};  // slow compute: communication is short next to it
  const StepPrediction s = predict_step(c, cost_plan(c, 0), p);
  EXPECT_LT(s.exposed_comm_ms, 0.5 * s.comm_ms);
  EXPECT_GT(s.exposed_comm_ms, 0.0);
}

TEST(StepModel, Zero1ReduceScattersAndGathersAreExposed) {
  const Config c = tiny({"parallel.strategy=zero1"}, 2);
  const CostPlan plan = cost_plan(c, 0);
  const MachineProfile p = synthetic();
  const StepPrediction s = predict_step(c, plan, p);
  const double rs = step_bytes_time_ms(plan, c, p, "reduce_scatter"), ag = step_bytes_time_ms(plan, c, p, "all_gather");
  const double small = 2 * collective_time_us(p.comm.intra_node, "all_reduce", "backend", 8, 2) / 1e3;  // norm, loss
  EXPECT_NEAR(s.exposed_comm_ms, rs + ag + small, 1e-9);
}

TEST(StepModel, FullShardReduceScattersAreExposedGathersHideWithPrefetch) {
  const Config c = tiny({"parallel.strategy=fsdp_full_shard"}, 2);
  const CostPlan plan = cost_plan(c, 0);
  MachineProfile p = synthetic();
  p.comm.intra_node.ops["all_gather/backend"] = {0, 0, 0};  // free gathers: only the reduce-scatters remain
  const StepPrediction s = predict_step(c, plan, p);
  const double rs = step_bytes_time_ms(plan, c, p, "reduce_scatter");
  const double small = 2 * collective_time_us(p.comm.intra_node, "all_reduce", "backend", 8, 2) / 1e3;
  EXPECT_NEAR(s.exposed_comm_ms, rs + small, 1e-9);

  // Costly gathers and fast compute: without prefetch every gather is exposed; prefetch hides part of them.
  MachineProfile slow = synthetic(1000, 1e-3);
  slow.compute.matmul_tflops = {{"float32", 1e-3}};
  const Config no_prefetch = tiny({"parallel.strategy=fsdp_full_shard", "parallel.prefetch=false"}, 2);
  const StepPrediction with = predict_step(c, plan, slow);
  const StepPrediction without = predict_step(no_prefetch, cost_plan(no_prefetch, 0), slow);
  EXPECT_NEAR(without.exposed_comm_ms, without.comm_ms, 1e-9);
  EXPECT_LT(with.exposed_comm_ms, without.exposed_comm_ms);
}

TEST(StepModel, GroupsSpanningNodesUseTheInterNodeModel) {
  // world 4, two ranks per node, hybrid with shard groups of 2: the shard group {0, 1} stays on one node,
  // the replica group {0, 2} crosses nodes.
  const Config c = tiny({"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2"}, 4);
  MachineProfile p = synthetic(100, 1e-3);
  p.comm.inter_node = uniform_comm(1000, 1e-2, 0);
  bool saw_inter = false, saw_intra = false;
  for (const auto& col : cost_plan(c, 0).collectives) {
    bool inter = false;
    const double us = planned_collective_us(col, c, p, &inter);
    const bool replica = col.what.find("across replicas") != std::string::npos;
    EXPECT_EQ(inter, replica) << col.what;
    EXPECT_DOUBLE_EQ(us, collective_time_us(inter ? *p.comm.inter_node : p.comm.intra_node, col.op, col.algorithm,
                                            col.bytes, col.group_size));
    saw_inter = saw_inter || inter;
    saw_intra = saw_intra || !inter;
  }
  EXPECT_TRUE(saw_inter && saw_intra);
}

}  // namespace
}  // namespace dtlab::analysis
