// tensor_parallel_comm_test.cpp: the collectives of real tensor-parallel jobs (`dtlab launch -n W dtlab train ...
// parallel.tp=T`, Gloo on 127.0.0.1) against the cost plan, exactly: for every step, one rank's records grouped by
// (op, algorithm, dtype, bytes, group size) — counts and bytes — equal the plan's calls of that step (the
// data-parallel strategy's over its group, tensor parallelism's over tp: strategies/tensor_parallel_cost.hpp).
// The plan is written from the model's shape and the layout; the records come from lab/comm as the layers ran, so
// a collective the layers add, drop or resize, or a plan that miscounts, fails here. Covers tensor parallel with
// and without sequence parallel, full and selective activation checkpointing, accumulation and tp × dp under ddp,
// fsdp_full_shard and zero1 (their units hold this rank's slices, over the data-parallel group at stride tp);
// pipeline stages' sends and sums under ddp (strategies/pipeline_cost.hpp); and pp x tp, the first stage's share
// and the last stage's (its records from rank<r>/comm_records.json, the plan for that rank).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";
constexpr int kSteps = 2;

// One kind of call: op, algorithm, dtype, bytes, group size.
using CallKind = std::tuple<std::string, std::string, std::string, int64_t, int64_t>;
using CallCounts = std::map<CallKind, int64_t>;

std::string describe(const CallCounts& counts) {
  std::ostringstream out;
  for (const auto& [k, n] : counts)
    out << "\n  " << n << " x " << std::get<0>(k) << " " << std::get<1>(k) << " " << std::get<2>(k) << " "
        << std::get<3>(k) << " B over " << std::get<4>(k) << " ranks";
  return out.str();
}

struct TpCommCase {
  std::string label;
  int world = 2;
  std::vector<std::string> overrides;
  int rank = 0;  // whose records: 0 from result.json, any other from rank<r>/comm_records.json
};
void PrintTo(const TpCommCase& c, std::ostream* os) { *os << c.label; }

class TensorParallelComm : public ::testing::TestWithParam<TpCommCase> {};

TEST_P(TensorParallelComm, EveryStepsCallsAndBytesAreThePlans) {
  const TpCommCase& c = GetParam();
  const auto dir = std::filesystem::temp_directory_path() / ("dtlab_tp_comm_" + c.label);
  std::filesystem::remove_all(dir);
  std::vector<std::string> overrides = {"train.steps=" + std::to_string(kSteps), "instrument.warmup_steps=0"};
  overrides.insert(overrides.end(), c.overrides.begin(), c.overrides.end());
  std::vector<std::string> args = {kBin + "dtlab", "launch", "-n",       std::to_string(c.world),
                                   kBin + "dtlab", "train",  "--config", kConfig};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), {"--out", dir.string()});
  const auto job = testing::run_job(args, 180);
  ASSERT_EQ(job.exit_code, 0) << job.output;

  const Config config = load_config(kConfig, overrides, c.world);
  ASSERT_GT(config.parallel.tp * config.parallel.pp, 1) << "a tensor- or pipeline-parallel case";
  CallCounts planned;
  int64_t model_parallel_calls = 0;
  for (const PlannedCollective& p : cost_plan(config, c.rank).collectives) {
    if (p.phase == "setup") continue;
    planned[{p.op, p.algorithm, p.dtype, p.bytes, p.group_size}] += p.count;
    if (p.mesh_dim == "tp" || p.mesh_dim == "pp") model_parallel_calls += p.count;
  }
  ASSERT_GT(model_parallel_calls, 0) << "the plan holds the model-parallel dimension's calls";

  const auto file = c.rank == 0 ? dir / "result.json" : dir / ("rank" + std::to_string(c.rank)) / "comm_records.json";
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file;
  nlohmann::json comm = nlohmann::json::parse(in);
  if (c.rank == 0) comm = comm.at("comm");
  ASSERT_FALSE(comm.at("records_truncated").get<bool>());
  std::map<int64_t, CallCounts> recorded;  // by step
  for (const auto& r : comm.at("records")) {
    // The trainer's metric sums are not the strategy's; a receive is its sender's planned send, counted there.
    if (r.at("tag") == "metric" || r.at("op") == "recv") continue;
    recorded[r.at("step").get<int64_t>()]
            [{r.at("op"), r.at("algorithm"), r.at("dtype"), r.at("bytes"), r.at("group_size")}] += 1;
  }
  ASSERT_EQ(recorded.size(), static_cast<size_t>(kSteps)) << "records of every step";
  for (const auto& [step, counts] : recorded)
    EXPECT_EQ(counts, planned) << "step " << step << " recorded:" << describe(counts)
                               << "\nthe cost plan:" << describe(planned);
  std::filesystem::remove_all(dir);
}

const std::string kSp = "parallel.sequence_parallel=true";

INSTANTIATE_TEST_SUITE_P(
    Layouts, TensorParallelComm,
    ::testing::Values(
        TpCommCase{"tp2", 2, {"parallel.tp=2"}}, TpCommCase{"tp2_sp", 2, {"parallel.tp=2", kSp}},
        TpCommCase{"tp2_full_ac", 2, {"parallel.tp=2", "parallel.activation_checkpointing=full"}},
        TpCommCase{"tp2_sp_selective_ac", 2, {"parallel.tp=2", kSp, "parallel.activation_checkpointing=selective"}},
        TpCommCase{"tp2_sp_full_ac_accum4",
                   2,
                   {"parallel.tp=2", kSp, "parallel.activation_checkpointing=full", "train.micro_batch=2"}},
        TpCommCase{"tp2_dp2", 4, {"parallel.tp=2", "train.micro_batch=2"}},
        TpCommCase{"tp4_sp_kv4", 4, {"parallel.tp=4", kSp, "model.n_kv_heads=4"}},
        TpCommCase{"tp2_dp2_full_shard",
                   4,
                   {"parallel.tp=2", kSp, "parallel.strategy=fsdp_full_shard", "train.micro_batch=2"}},
        TpCommCase{"tp2_dp2_zero1", 4, {"parallel.tp=2", "parallel.strategy=zero1", "train.micro_batch=2"}},
        // fp16 with dynamic loss scaling: the tp collectives carry fp16, and the overflow vote spans the tp group.
        TpCommCase{"tp2_dp2_full_shard_fp16",
                   4,
                   {"parallel.tp=2", "parallel.strategy=fsdp_full_shard", "train.micro_batch=2",
                    "precision.param_dtype=fp16", "precision.loss_scale=dynamic"}},
        // Pipeline stages (strategies/pipeline_cost.hpp): rank 0 is the first stage (sends activations forward), and
        // under interleaving it also holds virtual stage 2 (sends both ways).
        TpCommCase{"pp2_1f1b_m4", 2, {"parallel.pp=2", "train.micro_batch=2"}},
        TpCommCase{"pp2_gpipe_dp2", 4, {"parallel.pp=2", "train.micro_batch=2", "parallel.pp_schedule=gpipe"}},
        TpCommCase{"pp2_interleaved_v2",
                   2,
                   {"parallel.pp=2", "train.micro_batch=2", "model.n_layers=4", "parallel.pp_schedule=interleaved_1f1b",
                    "parallel.pp_virtual_stages=2"}},
        TpCommCase{"pp2_zero_bubble", 2, {"parallel.pp=2", "train.micro_batch=2", "parallel.pp_schedule=zero_bubble"}},
        // The sharded strategies under stages: zero1's stage units reduce-scattered and gathered back (fp16 with
        // the overflow vote over the shard group and the stages), no_shard's all-reduced, in bf16 sends.
        TpCommCase{"pp2_dp2_zero1_fp16",
                   4,
                   {"parallel.pp=2", "parallel.strategy=zero1", "train.micro_batch=2", "precision.param_dtype=fp16",
                    "precision.loss_scale=dynamic"}},
        TpCommCase{
            "pp2_dp2_no_shard_bf16",
            4,
            {"parallel.pp=2", "parallel.strategy=fsdp_no_shard", "train.micro_batch=2", "precision.param_dtype=bf16"}},
        // The modes that free parameters under stages: each unit gathered once per step and reduce-scattered once
        // after the flush, over the stage's data-parallel ranks (HYBRID: its shard group, then the replicas).
        TpCommCase{
            "pp2_dp2_full_shard", 4, {"parallel.pp=2", "parallel.strategy=fsdp_full_shard", "train.micro_batch=2"}},
        TpCommCase{"pp2_dp4_hybrid",
                   8,
                   {"parallel.pp=2", "parallel.strategy=fsdp_hybrid", "parallel.shard_size=2", "train.micro_batch=1"}},
        // Re-gathering per micro-batch (parallel.pp_reshard_after_forward): every unit gathered for each F and B of
        // each micro-batch and reduce-scattered after each (after W under zero bubble); interleaved: per chunk.
        TpCommCase{"pp2_dp2_full_shard_regather",
                   4,
                   {"parallel.pp=2", "parallel.strategy=fsdp_full_shard", "train.micro_batch=2",
                    "parallel.pp_reshard_after_forward=true"}},
        TpCommCase{"pp2_dp2_full_shard_regather_zero_bubble_last_stage",
                   4,
                   {"parallel.pp=2", "parallel.strategy=fsdp_full_shard", "train.micro_batch=1",
                    "parallel.pp_reshard_after_forward=true", "parallel.pp_schedule=zero_bubble"},
                   3},
        TpCommCase{"pp2_dp2_full_shard_regather_interleaved_v2",
                   4,
                   {"parallel.pp=2", "parallel.strategy=fsdp_full_shard", "train.micro_batch=2", "model.n_layers=4",
                    "parallel.pp_schedule=interleaved_1f1b", "parallel.pp_virtual_stages=2", "parallel.wrap=every_2",
                    "parallel.pp_reshard_after_forward=true"}},
        TpCommCase{"pp2_dp4_hybrid_regather",
                   8,
                   {"parallel.pp=2", "parallel.strategy=fsdp_hybrid", "parallel.shard_size=2", "train.micro_batch=1",
                    "parallel.pp_reshard_after_forward=true"}},
        // pp x tp: rank 0 is the first stage's tp rank 0 — the embedding's and its blocks' tp calls, none of the
        // head's or the loss's — and its sends carry 1/tp of the sequence under sequence parallelism.
        TpCommCase{"pp2_tp2_1f1b", 4, {"parallel.pp=2", "parallel.tp=2", "train.micro_batch=2"}},
        TpCommCase{"pp2_dp2_tp2_sp", 8, {"parallel.pp=2", "parallel.tp=2", kSp, "train.micro_batch=2"}},
        // The last stage's own calls (rank<r>/comm_records.json): it receives activations and sends gradients back,
        // holds the head and the vocabulary-parallel loss, and sums the loss; under zero bubble every tp call of the
        // backward runs in B (W is only the linears' weight GEMMs), as under 1F1B.
        TpCommCase{"pp2_1f1b_last_stage", 2, {"parallel.pp=2", "train.micro_batch=2"}, 1},
        TpCommCase{"pp2_tp2_1f1b_last_stage", 4, {"parallel.pp=2", "parallel.tp=2", "train.micro_batch=2"}, 3},
        TpCommCase{"pp2_tp2_zero_bubble_last_stage",
                   4,
                   {"parallel.pp=2", "parallel.tp=2", kSp, "train.micro_batch=2", "parallel.pp_schedule=zero_bubble"},
                   2}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace dtlab
