// parity_test.cpp: every strategy against the single-process reference, over real processes
// (`dtlab launch -n W strategy_rank ...`, Gloo on 127.0.0.1): the catalogue's matrices, tensor and pipeline
// parallelism. Mixed precision and the loss scaler against the same reference: precision_test.cpp; the suite's own
// guards (mutations it must catch, RELIABILITY A2, A3, A5, A6, C14, torchrun): reliability_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "strategies/catalog.hpp"
#include "tests/strategy/rank_launch.hpp"

namespace dtlab {
namespace {

using testing::kBin;
using testing::launch;

struct ParityCase {
  std::string strategy;
  int world;
  std::string optimizer;
  int accumulation;
  std::vector<std::string> extra = {};    // modifiers and shape overrides
  std::string label = "";                 // appended to the test name
  std::string program = "strategy_rank";  // strategy_rank_toy: linked with the toy catalogue (toy/catalog.def)
  int tp = 1;                             // parallel.tp: the data-parallel ranks are world / (tp * pp)
  int pp = 1;                             // parallel.pp (the schedule and its keys go in `extra`)
};

// Readable parameters in test logs (instead of gtest's byte dump).
void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << c.strategy << " world " << c.world << " " << c.optimizer << " accumulation " << c.accumulation;
}

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) {
  const auto& c = info.param;
  return c.strategy + "_w" + std::to_string(c.world) + "_" + c.optimizer + "_acc" + std::to_string(c.accumulation) +
         (c.label.empty() ? "" : "_" + c.label);
}

class Parity : public ::testing::TestWithParam<ParityCase> {};

// The catalogue's strategies but the reference that read `key` (every one for ""), in catalogue order. The matrices
// below select strategies by what their spec reads, so a new catalogue line joins each matrix it fits without an edit.
std::vector<const StrategySpec*> catalogue_reading(std::string_view key) {
  std::vector<const StrategySpec*> out;
  for (const StrategySpec* spec : strategy_specs())
    if (spec->id != kReferenceStrategy &&
        (key.empty() || std::find(spec->keys.begin(), spec->keys.end(), key) != spec->keys.end()))
      out.push_back(spec);
  return out;
}

// It shards within groups of parallel.shard_size ranks and replicates across them: tested in pairs at world 4.
bool grouped(const StrategySpec& spec) {
  return std::find(spec.keys.begin(), spec.keys.end(), "parallel.shard_size") != spec.keys.end();
}

// A byte-level token file of the license texts (`dtlab data build`), made once per test process.
std::string corpus_path() {
  static const std::string path = [] {
    const std::string out = ::testing::TempDir() + "dtlab_parity_corpus.bin";
    const auto job = testing::run_job({kBin + "dtlab", "data", "build", "--out", out}, 60);
    if (job.exit_code != 0) throw std::runtime_error("dtlab data build failed:\n" + job.output);
    return out;
  }();
  return path;
}

// Extra overrides standing for "file-backed data": the marker is replaced by the corpus path when the test runs.
const std::string kFileData = "<file-data>";

TEST_P(Parity, LossGradNormAndEveryParameterMatchTheReferenceAtEveryStep) {
  const auto& c = GetParam();
  const int global = c.world == 3 ? 6 : 8;
  const int micro = global / (c.world / (c.tp * c.pp) * c.accumulation);
  std::vector<std::string> args = {"parallel.strategy=" + c.strategy,
                                   "train.optimizer=" + c.optimizer,
                                   "train.micro_batch=" + std::to_string(micro),
                                   "train.steps=10",
                                   "train.global_batch=" + std::to_string(global),
                                   "parallel.tp=" + std::to_string(c.tp),
                                   "parallel.pp=" + std::to_string(c.pp)};
  // Replicas are whole-model copies over the world; under tp the ranks of a tp group hold different slices, under
  // pp different stages.
  const bool replicated = (c.strategy == "ddp" || c.strategy == "fsdp_no_shard") && c.tp == 1 && c.pp == 1;
  if (replicated) args.insert(args.begin(), "--check-replicas");
  // Tensor parallelism sums the split matmuls in another order; AdamW turns that into a different step for an
  // element whose gradient is near zero, so its parameters are compared per tensor (strategy_rank.cpp).
  if (c.tp > 1 && c.optimizer == "adamw") args.insert(args.begin(), "--params-norm-wise");
  for (const auto& e : c.extra) {
    if (e == kFileData) {
      args.push_back("data.source=file");
      args.push_back("data.path=" + corpus_path());
    } else {
      args.push_back(e);
    }
  }
  auto job = launch(c.world, args, 180, {}, c.program);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("parity OK"), std::string::npos) << job.output;
}

// The toy strategy of tests/strategy/toy/ (DDP without buckets), added as any strategy is: its two files and one
// catalogue line. It must match the reference like the lab's own strategies.
INSTANTIATE_TEST_SUITE_P(
    Toy, Parity,
    ::testing::Values(
        ParityCase{"ddp_nobucket", 2, "sgd", 2, {"train.grad_clip=0"}, "noclip", "strategy_rank_toy"},
        ParityCase{"ddp_nobucket", 4, "adamw", 1, {}, "", "strategy_rank_toy"},
        ParityCase{
            "ddp_nobucket", 2, "adamw", 1, {"parallel.activation_checkpointing=full"}, "ac", "strategy_rank_toy"}),
    case_name);

// Tensor parallelism (lab/train/tensor_parallel_plan.hpp) under ddp and the sharded strategies over the ranks tp
// leaves: tp = 2 alone
// (dp 1), tp = 2 x dp 2, tp = 4 (4 key/value heads, so each rank holds one), with activation checkpointing (the
// recomputed forward all-reduces again inside backward), tied embeddings (the vocabulary-parallel head reuses the
// embedding's rows), masked targets (the vocabulary-parallel loss skips them) and sequence parallelism. Each rank's
// slices are compared with the same slices of the reference's parameters; SGD without clipping carries any scale error
// into them.
std::vector<ParityCase> tensor_parallel_matrix() {
  const std::vector<std::string> no_clip = {"train.grad_clip=0"};
  std::vector<ParityCase> cases;
  std::string strategy = "ddp";
  auto add = [&](int world, int tp, const std::string& optimizer, int accumulation, std::vector<std::string> extra,
                 const std::string& label) {
    ParityCase c{strategy, world, optimizer, accumulation, std::move(extra), "tp" + std::to_string(tp) + label};
    c.tp = tp;
    cases.push_back(c);
  };
  add(2, 2, "sgd", 1, no_clip, "_noclip");
  add(2, 2, "adamw", 2, {}, "");
  add(4, 2, "sgd", 1, no_clip, "_dp2_noclip");
  add(4, 2, "adamw", 2, {}, "_dp2");
  add(4, 4, "adamw", 1, {"model.n_kv_heads=4"}, "_kv4");
  add(2, 2, "adamw", 1, {"parallel.activation_checkpointing=full"}, "_ac_full");
  add(2, 2, "adamw", 1, {"parallel.activation_checkpointing=selective"}, "_ac_selective");
  add(2, 2, "sgd", 1, {"model.tie_embeddings=true", "train.grad_clip=0"}, "_tied_noclip");
  add(4, 2, "adamw", 1, {"data.mask_token=7"}, "_dp2_masked");
  // tp placed outside the data-parallel dimensions (parallel.tp_placement=inter_node): tp groups {0, 2}, {1, 3}.
  add(4, 2, "sgd", 1, {"parallel.tp_placement=inter_node", "train.grad_clip=0"}, "_dp2_inter_node_noclip");
  // Sequence parallelism: the norms and residuals split along the sequence (all-gather / reduce-scatter).
  const std::string sp = "parallel.sequence_parallel=true";
  add(2, 2, "sgd", 1, {sp, "train.grad_clip=0"}, "_sp_noclip");
  add(4, 2, "adamw", 2, {sp}, "_sp_dp2");
  add(4, 4, "sgd", 1, {sp, "model.n_kv_heads=4", "train.grad_clip=0"}, "_sp_kv4_noclip");
  add(2, 2, "adamw", 1, {sp, "parallel.activation_checkpointing=selective"}, "_sp_ac_selective");
  // FSDP over the ranks tp leaves: its flat units hold this rank's slices (the replicated norms counted in the
  // gradient norm on tp rank 0 only, flat_unit.hpp counted_shard_ranges); dp 1 (the engine copies, F = 1), dp 2.
  strategy = "fsdp_full_shard";
  add(4, 2, "sgd", 1, no_clip, "_dp2_noclip");
  add(4, 2, "adamw", 2, {}, "_dp2");
  add(4, 2, "adamw", 1, {sp}, "_sp_dp2");
  add(4, 2, "adamw", 1, {sp, "parallel.tp_placement=inter_node"}, "_sp_dp2_inter_node");
  add(4, 2, "sgd", 1, {sp, "parallel.activation_checkpointing=full", "train.grad_clip=0"}, "_sp_dp2_ac_full_noclip");
  add(2, 2, "adamw", 1, {}, "");
  add(4, 4, "sgd", 1, {sp, "model.n_kv_heads=4", "train.grad_clip=0"}, "_sp_kv4_noclip");
  strategy = "fsdp_shard_grad_op";
  add(4, 2, "adamw", 1, {}, "_dp2");
  strategy = "zero1";
  add(4, 2, "sgd", 1, no_clip, "_dp2_noclip");
  strategy = "fsdp_no_shard";
  add(4, 2, "adamw", 1, {sp}, "_sp_dp2");
  // HYBRID over the ranks tp leaves: tp 2 x dp_replicate 2 x dp_shard 2 (8 ranks; shards over pairs of tp groups,
  // all-reduces the shards across the two replicas).
  strategy = "fsdp_hybrid";
  add(8, 2, "sgd", 1, {"parallel.shard_size=2", "train.grad_clip=0"}, "_dp2x2_noclip");
  return cases;
}

INSTANTIATE_TEST_SUITE_P(TensorParallel, Parity, ::testing::ValuesIn(tensor_parallel_matrix()), case_name);

// Pipeline parallelism (lab/train/pipeline_step.hpp) under ddp: every schedule at pp = 2 and pp = 4 with m = P and
// m = 2P micro-batches per step (train.accumulation, of a global batch of 8), under SGD without clipping and AdamW,
// interleaved with 2 chunks per rank; then pp 2 x dp 2, activation checkpointing, an uneven split and masked
// targets. Then the sharded strategies whose stage parameters stay whole (zero1, fsdp_no_shard), alone and beside
// data parallelism. Each rank's stage parameters are compared with the reference's of the same names, and the loss
// and norm (summed over the stages) with the reference's.
std::vector<ParityCase> pipeline_matrix() {
  std::vector<ParityCase> cases;
  std::string strategy = "ddp";
  auto add = [&](int world, int pp, const std::string& schedule, const std::string& optimizer, int m,
                 std::vector<std::string> extra, const std::string& label) {
    extra.push_back("parallel.pp_schedule=" + schedule);
    if (optimizer == "sgd") extra.push_back("train.grad_clip=0");
    ParityCase c{
        strategy,         world,
        optimizer,        m,
        std::move(extra), "pp" + std::to_string(pp) + "_" + schedule + label + (optimizer == "sgd" ? "_noclip" : "")};
    c.pp = pp;
    cases.push_back(c);
  };
  for (const std::string schedule : {"gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"})
    for (const int pp : {2, 4})
      for (const int m : {pp, 2 * pp})
        for (const std::string optimizer : {"sgd", "adamw"}) {
          // One block per virtual stage at least: pp (x 2 chunks when interleaved) of them.
          const bool interleaved = schedule == "interleaved_1f1b";
          const int layers = pp * (interleaved ? 2 : 1);
          std::vector<std::string> extra = {"model.n_layers=" + std::to_string(std::max(2, layers))};
          if (interleaved) extra.push_back("parallel.pp_virtual_stages=2");
          add(pp, pp, schedule, optimizer, m, extra, interleaved ? "_v2" : "");
        }
  add(4, 2, "1f1b", "adamw", 4, {}, "_dp2");
  add(2, 2, "1f1b", "adamw", 2, {"parallel.activation_checkpointing=full"}, "_ac_full");
  add(2, 2, "1f1b", "sgd", 2, {"model.n_layers=4", "parallel.pp_split=1"}, "_split1");
  add(2, 2, "zero_bubble", "adamw", 2, {"data.mask_token=7"}, "_masked");
  strategy = "zero1";
  add(2, 2, "1f1b", "adamw", 2, {}, "");
  add(2, 2, "zero_bubble", "sgd", 4, {}, "");
  add(4, 2, "interleaved_1f1b", "adamw", 2, {"model.n_layers=4", "parallel.pp_virtual_stages=2"}, "_dp2_v2");
  add(4, 2, "1f1b", "adamw", 2, {"parallel.wrap=every_2", "model.n_layers=4", "parallel.pp_split=1"},
      "_dp2_every2_cut");
  add(2, 2, "1f1b", "adamw", 2, {"parallel.offload=true"}, "_offload");
  strategy = "fsdp_no_shard";
  add(4, 2, "gpipe", "sgd", 2, {}, "_dp2");
  // The modes that free parameters (ShardedSchedule::begin_pipeline_step): each stage's units gathered once per step
  // and kept through the flush, each accumulated gradient reduce-scattered once after it; padded shards, offload,
  // HYBRID.
  strategy = "fsdp_full_shard";
  add(4, 2, "1f1b", "adamw", 2, {}, "_dp2");
  add(4, 2, "zero_bubble", "sgd", 2, {}, "_dp2");
  add(4, 2, "interleaved_1f1b", "adamw", 2, {"model.n_layers=4", "parallel.pp_virtual_stages=2"}, "_dp2_v2");
  add(4, 2, "gpipe", "sgd", 2,
      {"parallel.offload=true", "model.d_model=42", "model.n_heads=3", "model.n_kv_heads=1", "model.ffn_hidden=113"},
      "_dp2_offload_padded");
  strategy = "fsdp_shard_grad_op";
  add(4, 2, "1f1b", "adamw", 4, {"parallel.activation_checkpointing=full"}, "_dp2_ac_full");
  strategy = "fsdp_hybrid";
  add(8, 2, "1f1b", "adamw", 2, {"parallel.shard_size=2"}, "_dp4_2x2");
  // Re-gathering per micro-batch (parallel.pp_reshard_after_forward, ShardedSchedule::begin_pipeline_step): each
  // chunk gathered for every F and B, each micro-batch's gradients reduce-scattered once its backward (or W) is done.
  const std::string regather = "parallel.pp_reshard_after_forward=true";
  add(8, 2, "gpipe", "sgd", 2, {"parallel.shard_size=2", regather}, "_dp4_2x2_regather");
  strategy = "fsdp_full_shard";
  add(4, 2, "1f1b", "adamw", 4, {regather}, "_dp2_regather");
  add(4, 2, "zero_bubble", "sgd", 4, {regather, "parallel.wrap=every_2", "model.n_layers=4"}, "_dp2_every2_regather");
  add(4, 2, "interleaved_1f1b", "adamw", 2, {"model.n_layers=4", "parallel.pp_virtual_stages=2", regather},
      "_dp2_v2_regather");
  add(4, 2, "1f1b", "adamw", 2,
      {regather, "parallel.offload=true", "model.d_model=42", "model.n_heads=3", "model.n_kv_heads=1",
       "model.ffn_hidden=113"},
      "_dp2_offload_padded_regather");
  // pp x tp (lab/train/model_plan.hpp StackedPlan): each stage's units sliced over its tp group, the activations
  // crossing from tp rank to tp rank (1/tp of the sequence under sequence parallelism); then the 3-D run, pp 2 x dp
  // 2 x tp 2 over 8 ranks.
  const auto add_tp2 = [&](int world, const std::string& schedule, const std::string& optimizer, int m,
                           std::vector<std::string> extra, const std::string& label) {
    add(world, 2, schedule, optimizer, m, std::move(extra), "_tp2" + label);
    cases.back().tp = 2;
  };
  strategy = "ddp";
  add_tp2(4, "1f1b", "sgd", 2, {}, "");
  add_tp2(4, "1f1b", "adamw", 4, {"parallel.sequence_parallel=true"}, "_sp");
  add_tp2(4, "interleaved_1f1b", "adamw", 2, {"model.n_layers=4", "parallel.pp_virtual_stages=2"}, "_v2");
  add_tp2(4, "zero_bubble", "sgd", 2, {"parallel.sequence_parallel=true"}, "_sp");
  add_tp2(8, "1f1b", "adamw", 2, {}, "_dp2");
  add_tp2(8, "gpipe", "sgd", 2, {"parallel.sequence_parallel=true"}, "_dp2_sp");
  strategy = "zero1";
  add_tp2(8, "1f1b", "adamw", 2, {"parallel.sequence_parallel=true"}, "_dp2_sp");
  strategy = "fsdp_full_shard";
  add_tp2(8, "1f1b", "sgd", 2, {}, "_dp2");
  add_tp2(8, "zero_bubble", "adamw", 2, {"parallel.sequence_parallel=true", regather}, "_dp2_sp_regather");
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Pipeline, Parity, ::testing::ValuesIn(pipeline_matrix()), case_name);

INSTANTIATE_TEST_SUITE_P(Ddp, Parity,
                         ::testing::Values(ParityCase{"ddp", 2, "sgd", 1}, ParityCase{"ddp", 2, "adamw", 1},
                                           ParityCase{"ddp", 2, "sgd", 2}, ParityCase{"ddp", 2, "adamw", 2},
                                           ParityCase{"ddp", 4, "sgd", 1}, ParityCase{"ddp", 4, "adamw", 1},
                                           ParityCase{"ddp", 4, "sgd", 2}, ParityCase{"ddp", 4, "adamw", 2},
                                           ParityCase{
                                               "ddp", 2, "adamw", 1, {"parallel.activation_checkpointing=full"}, "ac"}),
                         case_name);

// RELIABILITY A3: every sharded strategy x {offload off, on} x {AC none, full}, world 2 and 4 (HYBRID
// 2x2). World 4 uses a shape whose units do not divide by 4 (d_model 42, ffn 113), so shards are padded.
std::vector<ParityCase> sharded_matrix() {
  const std::vector<std::string> padded_shape = {"model.d_model=42", "model.n_heads=3", "model.n_kv_heads=1",
                                                 "model.ffn_hidden=113"};
  std::vector<ParityCase> cases;
  for (const int world : {2, 4})
    for (const StrategySpec* spec : catalogue_reading("parallel.offload")) {
      const std::string strategy(spec->id);
      if (grouped(*spec) && world == 2) continue;  // its one group would be the world
      for (const bool offload : {false, true})
        for (const std::string ac : {"none", "full"}) {
          ParityCase c{strategy, world, offload ? "sgd" : "adamw", world == 2 ? 2 : 1};
          c.extra = {"parallel.offload=" + std::string(offload ? "true" : "false"),
                     "parallel.activation_checkpointing=" + ac};
          if (grouped(*spec)) c.extra.push_back("parallel.shard_size=2");
          if (world == 4) c.extra.insert(c.extra.end(), padded_shape.begin(), padded_shape.end());
          c.label = std::string(offload ? "offload" : "device") + "_ac_" + ac + (world == 4 ? "_padded" : "");
          cases.push_back(c);
        }
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sharded, Parity, ::testing::ValuesIn(sharded_matrix()), case_name);

// Wrap policies and the backend's reduce-scatter give the same training too.
INSTANTIATE_TEST_SUITE_P(
    Wrap, Parity,
    ::testing::Values(ParityCase{"fsdp_full_shard", 2, "adamw", 1, {"parallel.wrap=every_2"}, "every_2"},
                      ParityCase{"fsdp_full_shard", 2, "adamw", 1, {"parallel.wrap=model"}, "whole_model"},
                      ParityCase{"fsdp_full_shard", 2, "sgd", 1, {"parallel.reduce_scatter=backend"}, "backend_rs"},
                      ParityCase{"fsdp_full_shard", 2, "adamw", 1, {"parallel.prefetch=false"}, "no_prefetch"}),
    case_name);

// The gaps of the first matrix: SGD without clipping for every strategy (a gradient scale error reaches the
// parameters), offload with AdamW, accumulation at world 4, an odd world (3, padded), hybrid with shard groups of
// 1 and 4, selective and every-k activation checkpointing, masked targets (unequal target counts per rank) and
// file-backed data across ranks.
std::vector<ParityCase> coverage_matrix() {
  const std::vector<std::string> padded = {"model.d_model=42", "model.n_heads=3", "model.n_kv_heads=1",
                                           "model.ffn_hidden=113"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<ParityCase> cases;
  const std::vector<std::string> no_clip = {"train.grad_clip=0"};
  const std::vector<std::string> in_pairs = {"parallel.shard_size=2"};
  for (const StrategySpec* spec : catalogue_reading("")) {  // every strategy: SGD without clipping; an odd world
    const std::string s(spec->id);
    if (grouped(*spec)) {
      cases.push_back({s, 4, "sgd", 1, with(no_clip, in_pairs), "noclip_2x2"});
      continue;
    }
    cases.push_back({s, 2, "sgd", 2, no_clip, "noclip"});
    cases.push_back({s, 3, "adamw", 1, padded, "padded"});
  }
  for (const StrategySpec* spec : catalogue_reading("parallel.offload"))  // offload with AdamW
    if (grouped(*spec))
      cases.push_back({std::string(spec->id), 4, "adamw", 1, with({"parallel.offload=true"}, in_pairs), "offload_2x2"});
    else
      cases.push_back({std::string(spec->id), 2, "adamw", 1, {"parallel.offload=true"}, "offload"});
  for (const StrategySpec* spec : catalogue_reading("parallel.wrap"))  // flat units padded at world 4
    if (!grouped(*spec)) cases.push_back({std::string(spec->id), 4, "sgd", 2, with(no_clip, padded), "noclip_padded"});
  cases.push_back({"fsdp_hybrid", 4, "sgd", 1, with(no_clip, {"parallel.shard_size=1"}), "noclip_shard1"});
  cases.push_back({"fsdp_hybrid", 4, "sgd", 1, with(no_clip, {"parallel.shard_size=4"}), "noclip_shard4"});
  cases.push_back({"ddp", 2, "adamw", 1, {"parallel.activation_checkpointing=selective"}, "ac_selective"});
  cases.push_back({"fsdp_full_shard", 2, "adamw", 1, {"parallel.activation_checkpointing=selective"}, "ac_selective"});
  cases.push_back({"fsdp_full_shard",
                   2,
                   "adamw",
                   1,
                   {"parallel.activation_checkpointing=full", "parallel.checkpoint_every=2", "model.n_layers=4"},
                   "ac_every_2"});
  cases.push_back({"ddp", 2, "sgd", 2, {kFileData, "data.mask_token=0", "train.grad_clip=0"}, "file_masked"});
  cases.push_back({"fsdp_full_shard", 4, "adamw", 2, {"data.mask_token=7"}, "masked"});
  cases.push_back({"zero1", 2, "sgd", 1, {kFileData, "train.grad_clip=0"}, "file"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Coverage, Parity, ::testing::ValuesIn(coverage_matrix()), case_name);

}  // namespace
}  // namespace dtlab
