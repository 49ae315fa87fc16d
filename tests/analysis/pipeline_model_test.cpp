// pipeline_model_test.cpp: the pipeline step model (analysis/cost/pipeline_model.hpp) on the synthetic
// profile: the stages' times partition the whole model's compute, the sends are timed as send_recv, zero bubble's
// B and W split one backward and idle less, interleaving shortens the step, FSDP's per-micro-batch gathers run inside
// the actions, and predict() fills step_ms for a pipeline.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/cost/compute_model.hpp"
#include "analysis/cost/pipeline_model.hpp"
#include "analysis/cost/predict.hpp"
#include "lab/config.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "tests/analysis/synthetic_profile.hpp"

namespace dtlab::analysis {
namespace {

using testing::synthetic;

// tiny at pp 2, world 2: one data-parallel rank, micro-batch 4, global batch 4·m, so m micro-batches per step.
Config pipeline(int m, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {"train.micro_batch=4", "train.global_batch=" + std::to_string(4 * m),
                                        "parallel.strategy=ddp", "parallel.pp=2"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_config_text("", overrides, 2);
}

StepPrediction step_of(const Config& c, int rank, const MachineProfile& profile) {
  return predict_pipeline_step(c, cost_plan(c, rank), profile, rank);
}

TEST(PipelineStepModel, StagesShareTheWholeModelsComputeAndStepAddsUp) {
  const MachineProfile p = synthetic();
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const Config c = pipeline(4, {std::string("parallel.pp_schedule=") + schedule});
    const ComputeTime whole = compute_time(c, p);
    const StepPrediction r0 = step_of(c, 0, p), r1 = step_of(c, 1, p);
    // Each micro-batch runs F and B once on each stage: the ranks' busy times sum to m whole-model micro-steps.
    EXPECT_NEAR(r0.compute_ms + r1.compute_ms, 4 * (whole.forward_ms + whole.backward_ms), 1e-9) << schedule;
    // The head (2·V·h FLOPs per token) sits on the last stage: more work there than on the embedding's stage.
    EXPECT_GT(r1.compute_ms, r0.compute_ms) << schedule;
    EXPECT_NEAR(r0.step_ms, r0.compute_ms + r0.exposed_comm_ms + r0.optimizer_ms, 1e-9) << schedule;
    EXPECT_GT(r0.exposed_comm_ms, 0.0) << schedule;  // the bubble at least
  }
}

TEST(PipelineStepModel, SendsAreTimedAsOneSendRecvEach) {
  const Config c = pipeline(2);
  const StepPrediction r0 = step_of(c, 0, synthetic());
  // Rank 0 sends its activation for each of m = 2 micro-batches: 4 x 64 tokens x 64 x 4 bytes = 65 536 bytes, each
  // α + Sβ of send_recv/backend = 700 + 65 536 · 7e-3 = 1 158.752 µs.
  bool found = false;
  for (const OpTime& row : r0.by_op)
    if (row.op == "send") {
      found = true;
      EXPECT_EQ(row.count, 2);
      EXPECT_NEAR(row.time_ms, 2 * 1.158752, 1e-9);
    }
  EXPECT_TRUE(found);
  // The transfers lie on the critical path: with them the step is longer than with (almost) free links.
  EXPECT_GT(r0.step_ms, step_of(c, 0, synthetic(1e-9)).step_ms + 2 * 1.158752 - 1e-6);
}

TEST(PipelineStepModel, ZeroBubbleSplitsOneBackwardAndIdlesLessThanOneFOneB) {
  const Config one_f_one_b = pipeline(4), zero_bubble = pipeline(4, {"parallel.pp_schedule=zero_bubble"});
  const MachineProfile p = synthetic(1e-9);  // transfers ~free
  // B (everything but the linears' weight GEMMs) and W (those) add up to 1F1B's backward on every stage ...
  for (int rank : {0, 1})
    EXPECT_NEAR(step_of(zero_bubble, rank, p).compute_ms, step_of(one_f_one_b, rank, p).compute_ms, 1e-9) << rank;
  // ... and W fills the bubble: the same work in a shorter step.
  EXPECT_LT(step_of(zero_bubble, 0, p).step_ms, step_of(one_f_one_b, 0, p).step_ms - 1e-6);
}

TEST(PipelineStepModel, InterleavingShortensTheStepAtTheSameMicroBatches) {
  const MachineProfile p = synthetic(1e-9);  // transfers ~free: interleaving's extra sends cost nothing here
  const Config plain = pipeline(4, {"model.n_layers=4"});
  const Config interleaved =
      pipeline(4, {"model.n_layers=4", "parallel.pp_schedule=interleaved_1f1b", "parallel.pp_virtual_stages=2"});
  EXPECT_LT(step_of(interleaved, 0, p).step_ms, step_of(plain, 0, p).step_ms);
}

// FSDP under stages, pp 2 x dp 2 with m = 2: gathered once per step, its gather and reduce-scatter per unit run after
// the flush; re-gathered per micro-batch (parallel.pp_reshard_after_forward), each micro-batch's gathers and
// reduce-scatters run inside its chunk's F and B (W under zero bubble), on the critical path: the same compute, more
// calls, a longer step, and exposed communication that holds at least every in-action call of this rank.
TEST(PipelineStepModel, RegatheringPerMicroBatchPutsItsCallsInsideTheActions) {
  const MachineProfile p = synthetic();
  const auto fsdp = [](std::vector<std::string> extra) {
    std::vector<std::string> overrides = {"train.micro_batch=4", "train.global_batch=16",
                                          "parallel.strategy=fsdp_full_shard", "parallel.pp=2"};
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    return load_config_text("", overrides, 4);
  };
  const Config once = fsdp({}), per_micro_batch = fsdp({"parallel.pp_reshard_after_forward=true"});
  for (int rank : {0, 2}) {
    const StepPrediction a = step_of(once, rank, p), b = step_of(per_micro_batch, rank, p);
    EXPECT_NEAR(b.compute_ms, a.compute_ms, 1e-9) << rank;
    double in_actions_ms = 0;
    for (const PlannedCollective& c : cost_plan(per_micro_batch, rank).collectives)
      if (c.chunk >= 0) in_actions_ms += planned_collective_us(c, per_micro_batch, p) / 1e3 * c.count;
    EXPECT_GT(in_actions_ms, 0.0);
    EXPECT_GE(b.exposed_comm_ms, in_actions_ms) << rank;
    EXPECT_GT(b.comm_ms, a.comm_ms) << rank;
    EXPECT_GT(b.step_ms, a.step_ms) << rank;
    EXPECT_NEAR(b.step_ms, b.compute_ms + b.exposed_comm_ms + b.optimizer_ms, 1e-9) << rank;
    bool said = false;
    for (const std::string& n : b.notes) said = said || n.find("re-gathers per micro-batch") != std::string::npos;
    EXPECT_TRUE(said) << rank;
  }
  // Zero bubble moves the reduce-scatters into W: the same compute, the same calls.
  const Config after_w = fsdp({"parallel.pp_reshard_after_forward=true", "parallel.pp_schedule=zero_bubble"});
  EXPECT_NEAR(step_of(after_w, 0, p).compute_ms, step_of(per_micro_batch, 0, p).compute_ms, 1e-9);
  EXPECT_NEAR(step_of(after_w, 0, p).comm_ms, step_of(per_micro_batch, 0, p).comm_ms, 1e-9);
}

TEST(PipelineStepModel, PredictFillsTheStepTimeOfAPipelineRun) {
  const MachineProfile p = synthetic();
  const nlohmann::json j = predict(pipeline(4), &p, 0);
  ASSERT_TRUE(j["step_ms"].is_number()) << j.dump(2);
  EXPECT_NEAR(j["step_ms"].get<double>(), step_of(pipeline(4), 0, p).step_ms, 1e-9);
  EXPECT_GT(j["tokens_per_s"].get<double>(), 0.0);
}

// Four ranks on two cores, each measured with a core of its own: every rank computing gets half a core; with half of
// them computing on average each gets a whole one again (its one thread), with three quarters two thirds of one.
TEST(PipelineStepModel, RanksOnSharedCoresComputeFasterWhileOthersIdle) {
  MachineProfile p = synthetic();
  p.compute.cores = 2;
  p.compute.threads = 1;
  p.compute.ranks = 2;
  Config c = load_config_text(
      "",
      {"train.micro_batch=4", "train.global_batch=16", "parallel.strategy=ddp", "parallel.pp=4", "model.n_layers=4"},
      4);
  c.host_ranks = 4;
  EXPECT_DOUBLE_EQ(idle_sharers_speedup(c, p, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(idle_sharers_speedup(c, p, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(idle_sharers_speedup(c, p, 0.75), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(idle_sharers_speedup(c, p, 0.25), 2.0) << "one thread per rank: no faster than a core";
  Config two = pipeline(4);
  two.host_ranks = 2;
  EXPECT_DOUBLE_EQ(idle_sharers_speedup(two, p, 0.5), 1.0) << "two ranks on two cores are not oversubscribed";
  // The step replays the blocks sped up by the stages' busy share, and says so.
  const StepPrediction r0 = step_of(c, 0, p);
  bool said = false;
  for (const std::string& n : r0.notes) said = said || n.find("share oversubscribed cores") != std::string::npos;
  EXPECT_TRUE(said);
  // Without the speedup the stages' busy times sum to m whole-model micro-steps (as at two ranks above). 1F1B at P = 4,
  // m = 4 keeps a rank busy about m / (m + P - 1) = 4/7 of the span: the blocks run about x1.75 faster, at most x2.
  const ComputeTime whole = compute_time(c, p);
  double busy = 0;
  for (int rank = 0; rank < 4; ++rank) busy += step_of(c, rank, p).compute_ms;
  const double every_rank_computing = 4 * (whole.forward_ms + whole.backward_ms);
  EXPECT_LT(busy, every_rank_computing / 1.5);
  EXPECT_GE(busy, every_rank_computing / 2 - 1e-9);
}

}  // namespace
}  // namespace dtlab::analysis
