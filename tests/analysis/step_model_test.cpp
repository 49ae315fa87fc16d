// step_model_test.cpp: the compute and step-time models against hand-computed cases on a synthetic profile
// (round numbers, each collective key with its own α, β, γ), the exposure rules per strategy, and the choice of
// intra- vs inter-node model. Expected times are the α-β-γ formulas of docs/cost-models.md "Formulas" worked out in the
// comments.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "analysis/cost/comm_model.hpp"
#include "analysis/cost/compute_model.hpp"
#include "analysis/cost/predict.hpp"
#include "analysis/cost/step_model.hpp"
#include "lab/config.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "tests/analysis/synthetic_profile.hpp"

namespace dtlab::analysis {
namespace {

using testing::distinct_comm;
using testing::synthetic;

Config tiny(std::vector<std::string> overrides = {}, int64_t world = 1) {
  overrides.insert(overrides.begin(), {"train.micro_batch=4", "train.global_batch=" + std::to_string(4 * world)});
  return load_config_text("", overrides, world);
}

// tiny (see memory_model_test.cpp for the count): Ψ = 123 712 parameters, 107 328 of them outside the embedding;
// FSDP units at world 2 in fp32 bytes: embedding 65 536, block.0 181 760, block.1 181 760, head 65 792
// (sum 494 848 = 4Ψ). Micro-batch 4 x 64 = 256 tokens.
// The 8-byte all-reduces (grad norm, trainer loss) at p = 2 on all_reduce/backend:
//   2·1·100 + 2·(1/2)·8·1e-3 + (1/2)·8·2e-4 = 200 + 0.008 + 0.0008 = 200.0088 us.

TEST(ComputeModel, FlopsPerTokenIsSixNPlusAttention) {
  const Config c = tiny();
  // 6·(matmul parameters) + 12·L·h·s = 6·107 328 + 12·2·64·64 = 643 968 + 98 304 (the embedding is a gather).
  EXPECT_DOUBLE_EQ(compute_flops(c).model_per_token, 742272.0);
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
  // 256 tokens · 742 272 FLOPs / (1 TFLOP/s · 0.5) = 1.90021632e8 / 5e11 s = 0.380043264 ms; forward a third.
  EXPECT_DOUBLE_EQ(t.rate_tflops, 0.5);
  EXPECT_NEAR(t.step_ms, 0.380043264, 1e-12);
  EXPECT_NEAR(t.forward_ms, 0.126681088, 1e-12);
  EXPECT_NEAR(t.backward_ms, 0.253362176, 1e-12);
}

TEST(ComputeModel, CpuRateScalesWithThreadsPerRank) {
  MachineProfile p = synthetic();
  p.compute.threads = 1;
  p.compute.cores = 2;
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({"train.threads=2"}), p), 1.0);     // 2 threads of 1-thread rates
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({}, 2), p), 0.5);                   // 2 ranks on 2 cores: 1 each
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({"train.threads=2"}, 2), p), 0.5);  // oversubscribed: still 1 core each
}

// Two emulated nodes of one rank each (dtlab launch --nodes 2 -n 1): each node has one rank, but both ranks run on
// this machine's 2 cores, so each gets one thread, not two.
TEST(ComputeModel, EmulatedNodesShareTheMachinesCores) {
  MachineProfile p = synthetic();
  p.compute.threads = 1;
  p.compute.cores = 2;
  p.comm.ranks_per_node = 1;
  Config c = tiny({}, 2);
  c.ranks_per_node = 1;
  EXPECT_DOUBLE_EQ(achieved_tflops(c, p), 1.0);  // host unknown: the node's one rank gets both cores
  c.host_ranks = 2;
  EXPECT_DOUBLE_EQ(achieved_tflops(c, p), 0.5);  // both ranks on this machine: one core each
}

// `dtlab calibrate --nodes 2 --ranks 2` measures a rank while 3 companions load the same 2 cores (1 thread each): the
// profile's rate is already a shared core's, and records so (compute.ranks = 4). A job of those 4 ranks gets that rate
// as measured, not halved again (the crossover study's runs were predicted at twice their measured compute before).
TEST(ComputeModel, AProfileMeasuredOnSharedCoresIsNotSharedTwice) {
  MachineProfile p = synthetic();
  p.compute.threads = 1;
  p.compute.cores = 2;
  p.compute.ranks = 4;
  Config four = tiny({}, 4);
  four.ranks_per_node = 2;
  four.host_ranks = 4;
  EXPECT_DOUBLE_EQ(achieved_tflops(four, p), 0.5);         // the same 4 ranks on the 2 cores: the rate as measured
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({}, 2), p), 1.0);  // 2 ranks: a core each, twice the shared core's rate
  p.compute.ranks = 2;                                     // a loopback calibration: 2 ranks, a core each
  EXPECT_DOUBLE_EQ(achieved_tflops(four, p), 0.25);        // 4 ranks on its 2 cores: half a core each
  p.compute.ranks = 0;                                     // not recorded (older profiles): as if nothing was shared
  EXPECT_DOUBLE_EQ(achieved_tflops(four, p), 0.25);
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
  // Above 1 a step beat its dtype's GEMMs (bf16 held to AVX2 ran 1.35x at d_model 128); above 4 the GEMMs did not
  // time the kernels the step runs, and the loader says so, naming the file and the key.
  j["compute"]["train_efficiency_by_dtype"]["bfloat16"] = 1.5;
  EXPECT_DOUBLE_EQ(MachineProfile::from_json(j, "t").compute.train_efficiency_by_dtype.at("bfloat16"), 1.5);
  for (const auto& [key, value] : {std::pair{"by_dtype", 4.5}, std::pair{"width", 5.0}, std::pair{"scalar", 4.01}}) {
    nlohmann::json bad = j;
    if (std::string(key) == "by_dtype") bad["compute"]["train_efficiency_by_dtype"]["bfloat16"] = value;
    if (std::string(key) == "width") bad["compute"]["train_efficiency_by_width"]["float32"]["256"] = value;
    if (std::string(key) == "scalar") bad["compute"]["train_efficiency"] = value;
    try {
      MachineProfile::from_json(bad, "p.json");
      FAIL() << key << ": an efficiency above 4 must be refused";
    } catch (const ProfileError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("p.json"), std::string::npos) << what;
      EXPECT_NE(what.find("train_efficiency"), std::string::npos) << what;
      EXPECT_NE(what.find("must be <= 4"), std::string::npos) << what;
    }
  }
}

// A calibration measures the efficiency at two widths; between them it is interpolated on log2(d_model), outside them
// the nearest width holds, and a dtype without widths keeps its own figure.
TEST(ComputeModel, EfficiencyByWidthInterpolatesOnLog2OfTheWidth) {
  MachineProfile p = synthetic();
  p.compute.train_efficiency_by_width = {{"float32", {{32, 0.2}, {128, 0.6}}}};
  EXPECT_NEAR(achieved_tflops(tiny(), p), 0.4, 1e-12);  // tiny: d_model 64, halfway on log2 from 32 to 128
  EXPECT_NEAR(achieved_tflops(tiny({"model.d_model=256", "model.ffn_hidden=512"}), p), 0.6, 1e-12);  // wider
  EXPECT_NEAR(achieved_tflops(tiny({"model.d_model=16", "model.n_heads=2"}), p), 0.2, 1e-12);        // narrower
  EXPECT_NEAR(achieved_tflops(tiny({"model.d_model=128"}), p), 0.6, 1e-12);                          // measured
  p.compute.matmul_tflops["bfloat16"] = 4.0;
  EXPECT_DOUBLE_EQ(achieved_tflops(tiny({"precision.param_dtype=bf16"}), p), 2.0);  // bf16: no widths, 4 x 0.5

  nlohmann::json j = p.to_json();
  EXPECT_DOUBLE_EQ(MachineProfile::from_json(j, "t").compute.train_efficiency_by_width.at("float32").at(32), 0.2);
  j["compute"]["train_efficiency_by_width"]["float32"]["wide"] = 0.5;
  try {
    MachineProfile::from_json(j, "p.json");
    FAIL() << "a width that is not a number must be refused";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find("train_efficiency_by_width.float32.wide"), std::string::npos) << e.what();
  }
}

TEST(ComputeModel, GemmOverheadIsAFixedTimePerMicroStepPerLinearLayer) {
  // tiny has 2 blocks: 7·2 + 1 = 15 linear layers. 100 µs each: 1.5 ms per micro-step, a third in the forward,
  // whatever the micro-batch; only for the dtype it was measured in.
  MachineProfile p = synthetic();
  const ComputeTime plain = compute_time(tiny(), p);
  p.compute.gemm_overhead_us = {{"float32", 100.0}};
  const ComputeTime fixed = compute_time(tiny(), p);
  EXPECT_NEAR(fixed.overhead_ms, 1.5, 1e-12);
  EXPECT_NEAR(fixed.forward_ms, plain.forward_ms + 0.5, 1e-12);
  EXPECT_NEAR(fixed.backward_ms, plain.backward_ms + 1.0, 1e-12);
  const Config four_micro_steps = tiny({"train.micro_batch=1", "train.accumulation=4"});
  EXPECT_NEAR(compute_time(four_micro_steps, p).step_ms, plain.step_ms + 4 * 1.5, 1e-9)
      << "the same tokens in 4 micro-steps pay the overhead 4 times";
  EXPECT_EQ(compute_time(tiny({"precision.param_dtype=bf16"}), p).overhead_ms, 0.0) << "no bfloat16 entry: none";

  // Full AC recomputes every block's forward: executed / model FLOPs more overhead.
  const Config full = tiny({"parallel.activation_checkpointing=full"});
  const ComputeFlops flops = compute_flops(full);
  EXPECT_NEAR(compute_time(full, p).overhead_ms, 1.5 * flops.executed_per_token / flops.model_per_token, 1e-12);

  nlohmann::json j = p.to_json();
  EXPECT_DOUBLE_EQ(MachineProfile::from_json(j, "t").compute.gemm_overhead_us.at("float32"), 100.0);
  j["compute"]["gemm_overhead_us"]["float32"] = -1.0;
  try {
    MachineProfile::from_json(j, "p.json");
    FAIL() << "a negative overhead must be refused";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: compute.gemm_overhead_us.float32: must be a number >= 0"),
              std::string::npos)
        << e.what();
  }
}

TEST(StepModel, ElementwiseBytesAreWhatTheOptimizerPhaseIsTimedWith) {
  const Config c = tiny();
  const CostPlan plan = cost_plan(c, 0);
  // AdamW 80 bytes per element; gradient norm 12, clip 8, divide 8, zero 4 bytes per gradient: 123 712 · 112.
  EXPECT_DOUBLE_EQ(elementwise_bytes(c, plan), 13855744.0);
  EXPECT_NEAR(predict_step(c, plan, synthetic()).optimizer_ms, 1.3855744, 1e-12);  // 13 855 744 B at 10 GB/s
}

TEST(StepModel, SingleIsComputePlusOptimizer) {
  const Config c = tiny();
  const CostPlan plan = cost_plan(c, 0);
  const StepPrediction s = predict_step(c, plan, synthetic());
  EXPECT_NEAR(s.compute_ms, 0.380043264, 1e-12);  // see TimeIsTokensTimesFlopsOverAchievedRate
  EXPECT_NEAR(s.optimizer_ms, 1.3855744, 1e-12);  // see ElementwiseBytesAreWhatTheOptimizerPhaseIsTimedWith
  EXPECT_DOUBLE_EQ(s.exposed_comm_ms, 0.0);
  EXPECT_DOUBLE_EQ(s.comm_ms, 0.0);
  EXPECT_NEAR(s.step_ms, 1.765617664, 1e-12);      // 0.380043264 + 1.3855744
  EXPECT_NEAR(s.tokens_per_s, 144991.7529, 1e-3);  // 256 tokens / 1.765617664 ms
}

// Tensor parallelism (tp 2, dp 1, one micro-step): each rank runs half of every matmul, so compute is half of
// TimeIsTokensTimesFlopsOverAchievedRate's; its collectives block the layer after them, so every one of them is
// exposed in full on top of what the data-parallel strategy's schedule leaves exposed, and counts in comm_ms.
TEST(StepModel, TensorParallelComputeIsSplitAndItsCallsAreExposedInFull) {
  const Config c = tiny({"parallel.strategy=ddp", "parallel.tp=2", "train.global_batch=4"}, 2);
  ASSERT_EQ(c.train.accumulation, 1);
  const MachineProfile p = synthetic();
  EXPECT_NEAR(compute_time(c, p).step_ms, 0.380043264 / 2, 1e-12);
  const CostPlan plan = cost_plan(c, 0);
  CostPlan data_parallel_only = plan;
  std::erase_if(data_parallel_only.collectives, [](const PlannedCollective& x) { return x.mesh_dim == "tp"; });
  ASSERT_LT(data_parallel_only.collectives.size(), plan.collectives.size());
  double tp_ms = 0;
  int64_t block_all_reduces = 0;
  for (const PlannedCollective& x : plan.collectives) {
    if (x.mesh_dim != "tp") continue;
    tp_ms += planned_collective_us(x, c, p) / 1e3 * static_cast<double>(x.count);
    // [4, 64, 64] fp32 activations: 65 536 bytes; all_reduce/backend at p = 2 on the synthetic profile:
    // 2·100 + 65 536·1e-3 + (1/2)·65 536·2e-4 = 200 + 65.536 + 6.5536 = 272.0896 us.
    if (x.op == "all_reduce" && x.bytes == 65536) {
      block_all_reduces += x.count;
      EXPECT_NEAR(planned_collective_us(x, c, p), 272.0896, 1e-9);
    }
  }
  EXPECT_EQ(block_all_reduces, 2 * (1 + 2 * 2));  // forward and backward: the embedding / head and 2 per block
  const StepPrediction with_tp = predict_step(c, plan, p), without = predict_step(c, data_parallel_only, p);
  EXPECT_GT(tp_ms, 10 * 0.2720896);
  EXPECT_NEAR(with_tp.exposed_comm_ms, without.exposed_comm_ms + tp_ms, 1e-9);
  EXPECT_NEAR(with_tp.comm_ms, without.comm_ms + tp_ms, 1e-9);
  EXPECT_NEAR(with_tp.step_ms, without.step_ms + tp_ms, 1e-9);
}

TEST(StepModel, DdpBucketReadyAtTheEndOfBackwardIsExposed) {
  // tiny's gradients (494 848 bytes) fit the 1 MiB first bucket, which holds the embedding: its all-reduce can
  // start only when backward ends, so all of it is exposed, plus the trainer's loss all-reduce.
  const Config c = tiny({"parallel.strategy=ddp"}, 2);
  const CostPlan plan = cost_plan(c, 0);
  const MachineProfile p = synthetic();
  const StepPrediction s = predict_step(c, plan, p);
  // Bucket, all_reduce/backend at p = 2, S = 494 848: 2·100 + 494 848·1e-3 + (1/2)·494 848·2e-4
  //   = 200 + 494.848 + 49.4848 = 744.3328 us; plus the loss all-reduce 200.0088 us = 944.3416 us.
  EXPECT_NEAR(s.exposed_comm_ms, 0.9443416, 1e-9);
  EXPECT_NEAR(s.comm_ms, 0.9443416, 1e-9);
}

TEST(StepModel, DdpBucketsOverlapTheBackwardThatFollowsThem) {
  // Small buckets (cap 0.01 MB): all but the embedding's all-reduce can hide behind the rest of backward.
  const Config c = tiny({"parallel.strategy=ddp", "parallel.bucket_cap_mb=0.01"}, 2);
  MachineProfile p = synthetic(1e-3);
  p.compute.matmul_tflops = {{"float32", 1e-3}};  // slow compute: communication is short next to it
  const StepPrediction s = predict_step(c, cost_plan(c, 0), p);
  EXPECT_LT(s.exposed_comm_ms, 0.5 * s.comm_ms);
  EXPECT_GT(s.exposed_comm_ms, 0.0);
}

TEST(StepModel, OverlapCountsOnlyAsFarAsTheProfileSaysComputeHidesIt) {
  // The buckets of DdpBucketsOverlapTheBackwardThatFollowsThem, on profiles whose compute hides all, half and none of
  // a collective: what the schedule overlapped is charged at (1 - overlap_hidden) of it.
  const Config c = tiny({"parallel.strategy=ddp", "parallel.bucket_cap_mb=0.01"}, 2);
  MachineProfile p = synthetic(1e-3);
  p.compute.matmul_tflops = {{"float32", 1e-3}};
  const StepPrediction free = predict_step(c, cost_plan(c, 0), p);  // overlap_hidden absent: all hidden
  p.comm.intra_node.overlap_hidden = 1.0;
  const StepPrediction all = predict_step(c, cost_plan(c, 0), p);
  p.comm.intra_node.overlap_hidden = 0.5;
  const StepPrediction half = predict_step(c, cost_plan(c, 0), p);
  p.comm.intra_node.overlap_hidden = 0.0;
  const StepPrediction none = predict_step(c, cost_plan(c, 0), p);

  EXPECT_EQ(free.exposed_comm_ms, all.exposed_comm_ms);
  EXPECT_EQ(all.overlap_lost_ms, 0.0);
  const double overlapped = free.comm_ms - free.exposed_comm_ms;  // every bucket's all-reduce is scheduled
  ASSERT_GT(overlapped, 0.0);
  EXPECT_NEAR(half.overlap_lost_ms, 0.5 * overlapped, 1e-12);
  EXPECT_NEAR(half.exposed_comm_ms, free.exposed_comm_ms + 0.5 * overlapped, 1e-12);
  EXPECT_NEAR(none.exposed_comm_ms, none.comm_ms, 1e-12);  // nothing hidden: the step pays every collective
  EXPECT_NEAR(none.step_ms, free.step_ms + overlapped, 1e-12);
  EXPECT_EQ(none.comm_ms, free.comm_ms);
  // Every bucket's all-reduce is inside the one node: all of the lost overlap is the in-node part.
  EXPECT_DOUBLE_EQ(half.overlap_lost_in_node_ms, half.overlap_lost_ms);
  EXPECT_DOUBLE_EQ(all.overlap_lost_in_node_ms, 0.0);

  // Below 0 (measured on CPU ranks whose cores Gloo's threads share): the overlapped calls cost more than their time.
  p.comm.intra_node.overlap_hidden = -0.5;
  const StepPrediction worse = predict_step(c, cost_plan(c, 0), p);
  EXPECT_NEAR(worse.overlap_lost_ms, 1.5 * overlapped, 1e-12);
  EXPECT_NEAR(worse.step_ms, free.step_ms + 1.5 * overlapped, 1e-12);
  EXPECT_GT(worse.exposed_comm_ms, worse.comm_ms);
  bool said = false;
  for (const std::string& note : worse.notes) said = said || note.find("costs 50% more") != std::string::npos;
  EXPECT_TRUE(said) << "a note says what the negative figure means";
}

// A profile with both levels (the inter-node one distinct) and `ranks_per_node` ranks on a node, its compute slow
// enough that the schedules overlap something.
MachineProfile two_level_profile(int ranks_per_node) {
  MachineProfile p = synthetic(1e-3);
  p.compute.matmul_tflops = {{"float32", 1e-3}};
  p.comm.ranks_per_node = ranks_per_node;
  p.comm.inter_node = testing::distinct_comm(1e-3);
  return p;
}

TEST(StepModel, OverlapHiddenOfTheLevelACallCrossesIsTheOneCharged) {
  // One node per rank: the bucket all-reduces span nodes, so the inter-node model's overlap_hidden applies, not the
  // intra-node one's.
  const Config c = tiny({"parallel.strategy=ddp", "parallel.bucket_cap_mb=0.01"}, 2);
  MachineProfile p = two_level_profile(1);
  const StepPrediction free = predict_step(c, cost_plan(c, 0), p);
  p.comm.intra_node.overlap_hidden = 0.0;
  EXPECT_EQ(predict_step(c, cost_plan(c, 0), p).exposed_comm_ms, free.exposed_comm_ms);
  p.comm.inter_node->overlap_hidden = 0.0;
  const StepPrediction none = predict_step(c, cost_plan(c, 0), p);
  EXPECT_NEAR(none.exposed_comm_ms, free.comm_ms, 1e-12);
  ASSERT_GT(none.overlap_lost_ms, 0.0);
  EXPECT_EQ(none.overlap_lost_in_node_ms, 0.0) << "the calls span nodes: none of the loss is inside a node";
}

TEST(StepModel, TheLostOverlapInsideANodeIsTheIntraLevelsShare) {
  // HYBRID over 2 nodes of 2 ranks: the shard group's gathers and reduce-scatters stay inside a node, the replica
  // all-reduce crosses nodes (it runs after backward, so nothing of it is overlapped). With nothing hidden inside a
  // node, all of the lost overlap is the in-node part; with half hidden, half as much is lost.
  const Config c = tiny({"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2"}, 4);
  MachineProfile p = two_level_profile(2);
  p.comm.intra_node.overlap_hidden = 0.0;
  p.comm.inter_node->overlap_hidden = 1.0;
  const StepPrediction in_node = predict_step(c, cost_plan(c, 0), p);
  ASSERT_GT(in_node.overlap_lost_ms, 0.0);
  EXPECT_DOUBLE_EQ(in_node.overlap_lost_in_node_ms, in_node.overlap_lost_ms);
  p.comm.intra_node.overlap_hidden = 0.5;
  const StepPrediction half = predict_step(c, cost_plan(c, 0), p);
  EXPECT_NEAR(half.overlap_lost_in_node_ms, 0.5 * in_node.overlap_lost_in_node_ms, 1e-12);
}

TEST(StepModel, Zero1ReduceScattersHideBehindTheUnitBeforeGathersAreExposed) {
  const Config c = tiny({"parallel.strategy=zero1"}, 2);
  const CostPlan plan = cost_plan(c, 0);
  // reduce_scatter/ring per unit at p = 2: 400 + (1/2)·S·(4e-3 + 4e-4); over the four units (Σ S = 494 848):
  //   4·400 + 2.2e-3·494 848 = 1600 + 1088.6656 = 2688.6656 us.
  // all_gather/backend after the optimizer: 200 + (1/2)·S·2e-3; 4·200 + 1e-3·494 848 = 1294.848 us.
  // Grad-norm and loss all-reduces: 2·200.0088 = 400.0176 us. In all 4383.5312 us.
  // Each unit's reduce-scatter is in flight through the backward of the unit before (sharded/schedule.hpp). With
  // compute that takes no time nothing hides: all exposed.
  MachineProfile instant = synthetic();
  instant.compute.matmul_tflops = {{"float32", 1e12}};
  instant.compute.memory_GBps = 1e12;
  const StepPrediction all = predict_step(c, plan, instant);
  EXPECT_NEAR(all.comm_ms, 4.3835312, 1e-9);
  EXPECT_NEAR(all.exposed_comm_ms, 4.3835312, 1e-6);
  // With slow compute the head's and block.1's hide behind the next block's backward. The last two issued do not:
  // block.0's is waited for after the embedding's backward, which the model counts as no compute (a gather of rows,
  // no matmul), and the embedding's at the end of backward. Block (S = 181 760): 400 + 2.2e-3·181 760 = 799.872 us;
  // embedding (S = 65 536): 544.1792 us. 799.872 + 544.1792 + 1294.848 + 400.0176 = 3038.9168 us.
  MachineProfile slow = synthetic();
  slow.compute.matmul_tflops = {{"float32", 1e-3}};
  const StepPrediction s = predict_step(c, plan, slow);
  EXPECT_NEAR(s.comm_ms, 4.3835312, 1e-9);
  EXPECT_NEAR(s.exposed_comm_ms, 3.0389168, 1e-9);
}

TEST(StepModel, FullShardReduceScattersHideBehindTheUnitBeforeGathersWithPrefetch) {
  const Config c = tiny({"parallel.strategy=fsdp_full_shard"}, 2);
  const CostPlan plan = cost_plan(c, 0);
  MachineProfile p = synthetic();
  p.comm.intra_node.ops["all_gather/backend"] = {0, 0, 0};  // free gathers: only the reduce-scatters remain
  p.compute.matmul_tflops = {{"float32", 1e12}};            // and compute that takes no time: nothing hides
  p.compute.memory_GBps = 1e12;
  // The four ring reduce-scatters (2688.6656 us, as in Zero1ReduceScattersHideBehindTheUnitBeforeGathersAreExposed)
  // + grad norm + loss.
  EXPECT_NEAR(predict_step(c, plan, p).exposed_comm_ms, 3.0886832, 1e-6);  // 2688.6656 + 400.0176 us
  // Slow compute: as for zero1, block.0's and the embedding's are exposed: 799.872 + 544.1792 + 400.0176 us.
  p.compute.matmul_tflops = {{"float32", 1e-3}};
  p.compute.memory_GBps = 10;
  EXPECT_NEAR(predict_step(c, plan, p).exposed_comm_ms, 1.7440688, 1e-9);

  // Without prefetch every gather waits in line with compute: the whole step's communication is exposed.
  //   forward all_gather/backend of 4 units: 4·200 + 1e-3·494 848 = 1294.848 us
  //   backward re-gathers of all units but the head (Σ S = 429 056): 3·200 + 429.056 = 1029.056 us
  //   reduce-scatters 2688.6656 us, grad norm + loss 400.0176 us: 5412.5872 us in all.
  // (Each unit's re-gather is issued right behind the previous unit's reduce-scatter on the one stream, so it waits
  // for it.) With prefetch, gathers run under the previous unit's compute (slow compute here): less is exposed.
  MachineProfile slow = synthetic();
  slow.compute.matmul_tflops = {{"float32", 1e-3}};
  const Config no_prefetch = tiny({"parallel.strategy=fsdp_full_shard", "parallel.prefetch=false"}, 2);
  const StepPrediction with = predict_step(c, plan, slow);
  const StepPrediction without = predict_step(no_prefetch, cost_plan(no_prefetch, 0), slow);
  EXPECT_NEAR(without.comm_ms, 5.4125872, 1e-9);
  EXPECT_NEAR(without.exposed_comm_ms, 5.4125872, 1e-9);
  EXPECT_NEAR(with.comm_ms, 5.4125872, 1e-9);
  EXPECT_LT(with.exposed_comm_ms, without.exposed_comm_ms);
}

TEST(StepModel, GroupsSpanningNodesUseTheInterNodeModel) {
  // world 4, two ranks per node, hybrid with shard groups of 2: the shard group {0, 1} stays on one node,
  // the replica group {0, 2} crosses nodes.
  const Config c = tiny({"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2"}, 4);
  MachineProfile p = synthetic();
  p.comm.inter_node = distinct_comm(10);
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
  // By hand: the embedding unit's gradient shard (16 384 / 2 · 4 = 32 768 B) across the replicas {0, 2} on the
  // inter-node all_reduce/backend (1000, 1e-2, 2e-3): 2·1000 + 32 768·1e-2 + (1/2)·32 768·2e-3 = 2360.448 us;
  // its forward gather in the shard group {0, 1} on the intra-node all_gather/backend (200, 2e-3):
  // 200 + (1/2)·65 536·2e-3 = 265.536 us.
  bool saw_replica_embedding = false, saw_gather_embedding = false;
  for (const auto& col : cost_plan(c, 0).collectives) {
    if (col.what == "unit embedding gradient shard across replicas") {
      saw_replica_embedding = true;
      EXPECT_NEAR(planned_collective_us(col, c, p), 2360.448, 1e-9);
    }
    if (col.op == "all_gather" && col.phase == "forward" && col.what.find("unit embedding ") == 0) {
      saw_gather_embedding = true;
      EXPECT_NEAR(planned_collective_us(col, c, p), 265.536, 1e-9);
    }
  }
  EXPECT_TRUE(saw_replica_embedding && saw_gather_embedding);
}

// Hybrid's replica groups {0, 2} and {1, 3} cross the nodes side by side: with one link per node (ranks_per_link 2)
// both streams share it, so each call's β term doubles; α and γ do not change. With a link per rank (1) they don't.
TEST(StepModel, ReplicaGroupsSharingANodesLinkPayItsRateTwice) {
  const Config c = tiny({"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2"}, 4);
  MachineProfile own_links = synthetic();
  own_links.comm.inter_node = distinct_comm(10);
  MachineProfile shared = own_links;
  shared.comm.ranks_per_link = 2;
  bool saw_replica = false;
  for (const auto& col : cost_plan(c, 0).collectives) {
    const double alone = planned_collective_us(col, c, own_links), sharing = planned_collective_us(col, c, shared);
    if (col.stride == 1) {
      EXPECT_DOUBLE_EQ(sharing, alone) << col.what << ": inside a node, no link shared";
      continue;
    }
    saw_replica = true;
    EXPECT_EQ(link_sharing(col, shared), 2) << col.what;
    const CostShape shape = cost_shape(col.op, col.algorithm, col.bytes, col.group_size);
    const CollectiveCost& k = shared.comm.inter_node->ops.at(col.op + "/" + col.algorithm);
    EXPECT_NEAR(sharing - alone, shape.beta * k.beta_us_per_byte, 1e-9) << col.what;
  }
  EXPECT_TRUE(saw_replica);
}

// DDP across 2 nodes x 2 with parallel.collectives=auto: each bucket is a reduce-scatter in the node (delays
// backward), an all-reduce of half the bucket across nodes (overlaps it) and an all-gather in the node (after
// backward). tiny's one bucket is ready only at the end of backward, so everything is exposed: the three calls
// plus the loss all-reduce; flat: the one all-reduce over 4 ranks on the inter-node model.
TEST(StepModel, DdpHierarchicalBucketIsThreeCallsOnTheirLevels) {
  Config c = tiny({"parallel.strategy=ddp"}, 4);
  c.ranks_per_node = 2;
  MachineProfile p = synthetic();
  p.comm.inter_node = distinct_comm(10);
  p.comm.ranks_per_link = 2;
  const CostPlan plan = cost_plan(c, 0);
  double calls_us = 0;
  int levels = 0;
  for (const auto& col : plan.collectives) {
    if (col.phase != "backward") continue;
    ++levels;
    calls_us += planned_collective_us(col, c, p);
  }
  ASSERT_EQ(levels, 3);
  // reduce_scatter/ring p=2 S=494 848: 400 + (1/2)·S·(4e-3 + 4e-4) = 1488.6656; all_gather/ring: 300 + (1/2)·S·3e-3
  // = 1042.272; all_reduce/backend across nodes p=2, S/2 = 247 424, sharing 2 on the inter model (×10):
  // 2·1000 + 2·247 424·1e-2 + (1/2)·247 424·2e-3 = 2000 + 4948.48 + 247.424 = 7195.904.
  EXPECT_NEAR(calls_us, 1488.6656 + 1042.272 + 7195.904, 1e-6);
  const StepPrediction s = predict_step(c, plan, p);
  const double loss_us = 2 * 3 * 1000 + 2 * 0.75 * 8 * 1e-2 + 0.75 * 8 * 2e-3;  // over 4 ranks, spans: inter
  EXPECT_NEAR(s.exposed_comm_ms, (calls_us + loss_us) / 1e3, 1e-9);

  Config flat = c;
  flat.parallel.collectives = "flat";
  int flat_calls = 0;
  for (const auto& col : cost_plan(flat, 0).collectives)
    if (col.phase == "backward") {
      ++flat_calls;
      EXPECT_EQ(col.group_size, 4);
      bool inter = false;
      planned_collective_us(col, flat, p, &inter);
      EXPECT_TRUE(inter) << "a ring over both nodes crosses the link";
      EXPECT_EQ(link_sharing(col, p), 1) << "one ring, one stream per link";
    }
  EXPECT_EQ(flat_calls, 1);
}

// parallel.collectives=auto decided by the model: with a slow link shared by the node's ranks the hierarchical
// all-reduce (half the bytes cross per rank) wins; when the node's own links are the slow ones, flat does; nothing
// to decide on one node, for another strategy, or when the setting is not auto.
TEST(StepModel, AutoCollectivesAreTheFasterPrediction) {
  Config c = tiny({"parallel.strategy=ddp"}, 4);
  c.ranks_per_node = 2;
  MachineProfile slow_link = synthetic();
  slow_link.comm.inter_node = distinct_comm(10);
  slow_link.comm.ranks_per_link = 2;
  const std::optional<CollectivesChoice> a = choose_collectives(c, slow_link);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->collectives, "hierarchical");
  EXPECT_LT(a->hierarchical_step_ms, a->flat_step_ms);
  MachineProfile slow_node = synthetic(100);
  slow_node.comm.inter_node = distinct_comm(1);
  const std::optional<CollectivesChoice> b = choose_collectives(c, slow_node);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->collectives, "flat");
  EXPECT_LT(b->flat_step_ms, b->hierarchical_step_ms);
  Config one_node = c;
  one_node.ranks_per_node = 4;
  EXPECT_FALSE(choose_collectives(one_node, slow_link));
  Config fixed = c;
  fixed.parallel.collectives = "flat";
  EXPECT_FALSE(choose_collectives(fixed, slow_link));
  EXPECT_FALSE(choose_collectives(tiny({"parallel.strategy=zero1"}, 4), slow_link));
}

// FULL_SHARD, SHARD_GRAD_OP and ZeRO-1 across nodes: a hierarchical gather or reduce-scatter is two calls of one
// unit (strategies/sharded_plan.cpp), which the schedule runs as one (the unit pipeline would refuse a plan with
// more calls than units). Each call's time is the sum of its levels', and on a slow link the two-level form, which
// sends 1/K of each unit across it, is the faster one and auto's choice; with Gloo's reduce-scatter it is not on offer.
TEST(StepModel, ShardedHierarchicalCallsAreOneCallPerUnitOnTwoLevels) {
  MachineProfile slow_link = synthetic();
  slow_link.comm.inter_node = distinct_comm(10);
  slow_link.comm.ranks_per_link = 2;
  for (const std::string id : {"fsdp_full_shard", "fsdp_shard_grad_op", "zero1"}) {
    SCOPED_TRACE(id);
    Config flat = tiny({"parallel.strategy=" + id}, 4);
    flat.ranks_per_node = 2;
    flat.parallel.collectives = "flat";
    Config two_level = flat;
    two_level.parallel.collectives = "hierarchical";
    const CostPlan plan = cost_plan(two_level, 0);
    double levels_ms = 0;
    for (const auto& col : plan.collectives)
      if (col.unit >= 0) levels_ms += planned_collective_us(col, two_level, slow_link) * 1e-3 * col.count;
    const StepPrediction h = predict_step(two_level, plan, slow_link);
    const StepPrediction f = predict_step(flat, cost_plan(flat, 0), slow_link);
    EXPECT_GT(levels_ms, 0);
    EXPECT_LE(levels_ms, h.comm_ms + 1e-9) << "every level is timed";
    EXPECT_LT(h.comm_ms, f.comm_ms);
    Config automatic = flat;
    automatic.parallel.collectives = "auto";
    const std::optional<CollectivesChoice> choice = choose_collectives(automatic, slow_link);
    ASSERT_TRUE(choice.has_value());
    EXPECT_EQ(choice->collectives, "hierarchical");
    automatic.parallel.reduce_scatter = "backend";
    EXPECT_FALSE(choose_collectives(automatic, slow_link)) << "refused by the strategy's check: stays flat";
  }
}

// The hierarchical all-reduce as a pipeline: one piece is its three calls back to back; four pieces on a slow link
// keep the link busy (rs + 4·ar + ag), on a slow node the node's CPU (4·(rs + ag)).
TEST(StepModel, HierarchicalAllReduceIsATwoResourcePipeline) {
  MachineProfile p = synthetic();
  p.comm.inter_node = distinct_comm(10);
  p.comm.ranks_per_link = 2;
  const int64_t piece = 1 << 20;
  const auto call = [](const MachineProfile& on, const char* op, const char* alg, int64_t bytes, int size, int stride) {
    return planned_collective_us({op, alg, "float32", bytes, size, "backward", 1, "t", stride}, Config{}, on);
  };
  const double rs = call(p, "reduce_scatter", "ring", piece, 2, 1), ag = call(p, "all_gather", "ring", piece, 2, 1);
  const double ar = call(p, "all_reduce", "backend", piece / 2, 2, 2);
  EXPECT_NEAR(hierarchical_all_reduce_us(p, piece, 2, 2, piece), rs + ar + ag, 1e-9);
  ASSERT_GT(ar, rs + ag) << "the link is the busier resource here";
  EXPECT_NEAR(hierarchical_all_reduce_us(p, 4 * piece, 2, 2, piece), rs + 4 * ar + ag, 1e-9);
  MachineProfile slow_node = p;
  slow_node.comm.intra_node = distinct_comm(100);
  const double rs_slow = call(slow_node, "reduce_scatter", "ring", piece, 2, 1);
  const double ag_slow = call(slow_node, "all_gather", "ring", piece, 2, 1);
  EXPECT_NEAR(hierarchical_all_reduce_us(slow_node, 4 * piece, 2, 2, piece), 4 * (rs_slow + ag_slow), 1e-9);
}

}  // namespace
}  // namespace dtlab::analysis
