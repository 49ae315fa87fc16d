// mesh_test.cpp: the device mesh (lab/mesh.hpp) — rank order, groups per dimension and flattened, expert groups,
// node placement, the degree rules — and the mesh a config gives (strategies/catalog.hpp device_mesh, the
// config's parallel.pp/cp/tp/ep keys). Torch-free.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/mesh.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {
namespace {

using Groups = std::vector<std::vector<int>>;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DeviceMesh, RanksAreRowMajorWithTpInnermost) {
  // pp 2 x dp_replicate 1 x dp_shard 2 x cp 1 x tp 2 = 8 ranks, written out by hand.
  const DeviceMesh mesh(ParallelDims{.pp = 2, .dp_shard = 2, .tp = 2}, 8);
  EXPECT_EQ(mesh.coords(0), (MeshCoords{0, 0, 0, 0, 0}));
  EXPECT_EQ(mesh.coords(1), (MeshCoords{0, 0, 0, 0, 1}));
  EXPECT_EQ(mesh.coords(2), (MeshCoords{0, 0, 1, 0, 0}));
  EXPECT_EQ(mesh.coords(5), (MeshCoords{1, 0, 0, 0, 1}));
  EXPECT_EQ(mesh.coords(7), (MeshCoords{1, 0, 1, 0, 1}));
  for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(mesh.rank_at(mesh.coords(r)), r);
  EXPECT_EQ(mesh.coord(6, MeshDim::pp), 1);
  EXPECT_EQ(mesh.coord(6, MeshDim::dp_shard), 1);
  EXPECT_EQ(mesh.coord(6, MeshDim::tp), 0);
}

TEST(DeviceMesh, GroupsOfOneDimensionAndOfSeveralFlattened) {
  const DeviceMesh mesh(ParallelDims{.pp = 2, .dp_shard = 2, .tp = 2}, 8);
  EXPECT_EQ(mesh.groups({MeshDim::tp}), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(mesh.groups({MeshDim::dp_shard}), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh.groups({MeshDim::pp}), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(mesh.groups(kDataParallelDims), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh.groups({MeshDim::dp_shard, MeshDim::tp}), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(mesh.groups({}), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(mesh.group_of(7, {MeshDim::dp_shard}), (std::vector<int>{5, 7}));
  EXPECT_EQ(mesh.index_in_group(7, {MeshDim::dp_shard}), 1);
  EXPECT_EQ(mesh.index_in_group(5, {MeshDim::pp}), 1);
  // Every rank is in exactly one group of every dimension.
  for (const MeshDim dim : kAllMeshDims) {
    std::vector<int> seen(8, 0);
    for (const auto& g : mesh.groups({dim}))
      for (const int r : g) ++seen[static_cast<size_t>(r)];
    EXPECT_EQ(seen, std::vector<int>(8, 1)) << mesh_dim_name(dim);
  }
}

TEST(DeviceMesh, HybridIsReplicateTimesShard) {
  const DeviceMesh mesh(ParallelDims{.dp_replicate = 2, .dp_shard = 3}, 6);
  EXPECT_EQ(mesh.groups({MeshDim::dp_shard}), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(mesh.groups({MeshDim::dp_replicate}), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(mesh.groups(kDataParallelDims), (Groups{{0, 1, 2, 3, 4, 5}}));
}

TEST(DeviceMesh, ExpertGroupsBorrowFromShardContextAndTensorRanks) {
  const DeviceMesh mesh(ParallelDims{.dp_replicate = 2, .dp_shard = 2, .tp = 2, .ep = 2}, 8);
  EXPECT_EQ(mesh.expert_groups(), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  const DeviceMesh wide(ParallelDims{.dp_replicate = 2, .dp_shard = 2, .tp = 2, .ep = 4}, 8);
  EXPECT_EQ(wide.expert_groups(), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(DeviceMesh, InnerDimensionsStayInsideANode) {
  // 2 nodes of 4 ranks: tp (stride 1) and dp_shard (stride 2) fit in a node, pp (stride 4) crosses.
  const DeviceMesh mesh(ParallelDims{.pp = 2, .dp_shard = 2, .tp = 2}, 8);
  EXPECT_FALSE(mesh.spans_nodes(MeshDim::tp, 4));
  EXPECT_FALSE(mesh.spans_nodes(MeshDim::dp_shard, 4));
  EXPECT_TRUE(mesh.spans_nodes(MeshDim::pp, 4));
  EXPECT_FALSE(mesh.spans_nodes(MeshDim::cp, 4));  // size 1
  EXPECT_TRUE(mesh.spans_nodes(MeshDim::dp_shard, 2));
  EXPECT_FALSE(mesh.spans_nodes(MeshDim::pp, 0));  // one node
}

TEST(DeviceMesh, DegreesThatDoNotMultiplyToTheWorldAreRefusedNamingEach) {
  const std::string e = error_of([] { DeviceMesh(ParallelDims{.dp_shard = 2, .tp = 2}, 6); });
  EXPECT_NE(e.find("pp(1) * dp_replicate(1) * dp_shard(2) * cp(1) * tp(2) = 4 != world_size(6)"), std::string::npos)
      << e;
  EXPECT_NE(error_of([] { DeviceMesh(ParallelDims{.tp = 0}, 1); }).find("tp=0 must be >= 1"), std::string::npos);
  const std::string ep = error_of([] { DeviceMesh(ParallelDims{.dp_replicate = 2, .dp_shard = 3, .ep = 2}, 6); });
  EXPECT_NE(ep.find("ep(2) must divide dp_shard(3) * cp(1) * tp(1) = 3"), std::string::npos) << ep;
  EXPECT_NE(error_of([] { DeviceMesh(ParallelDims{}, 1).coords(1); }).find("rank 1 is outside [0, 1)"),
            std::string::npos);
}

TEST(DeviceMesh, DescribesAndRecordsItsDegrees) {
  const DeviceMesh mesh(ParallelDims{.dp_replicate = 2, .dp_shard = 2}, 4);
  EXPECT_EQ(mesh.describe(), "pp 1 x dp_replicate 2 x dp_shard 2 x cp 1 x tp 1 (ep 1)");
  EXPECT_EQ(mesh.to_json(), nlohmann::json::parse(R"({"pp":1,"dp_replicate":2,"dp_shard":2,"cp":1,"tp":1,"ep":1})"));
  for (const MeshDim dim : kAllMeshDims) EXPECT_EQ(parse_mesh_dim(mesh_dim_name(dim)), dim);
  EXPECT_FALSE(parse_mesh_dim("dp").has_value());
}

// The mesh each strategy of the catalogue lays its data-parallel ranks on.
TEST(ConfigMesh, EachStrategyLaysTheDataParallelRanksOnTheMesh) {
  const auto dims_of = [](const std::string& strategy, int64_t world, std::vector<std::string> more = {}) {
    more.push_back("parallel.strategy=" + strategy);
    more.push_back("train.global_batch=" + std::to_string(4 * world));
    more.push_back("train.micro_batch=4");
    return device_mesh(load_config_text("", more, world)).dims();
  };
  EXPECT_EQ(dims_of("ddp", 4).dp_replicate, 4);
  EXPECT_EQ(dims_of("ddp", 4).dp_shard, 1);
  EXPECT_EQ(dims_of("fsdp_full_shard", 4).dp_shard, 4);
  EXPECT_EQ(dims_of("zero1", 3).dp_shard, 3);
  EXPECT_EQ(dims_of("fsdp_shard_grad_op", 2).dp_shard, 2);
  EXPECT_EQ(dims_of("fsdp_no_shard", 4).dp_replicate, 4);
  const ParallelDims hybrid = dims_of("fsdp_hybrid", 4, {"parallel.shard_size=2"});
  EXPECT_EQ(hybrid.dp_replicate, 2);
  EXPECT_EQ(hybrid.dp_shard, 2);
  EXPECT_EQ(dims_of("single", 1).product(), 1);
  for (const StrategySpec* spec : strategy_specs()) {
    const int64_t world = spec->id == kReferenceStrategy ? 1 : 4;
    const ParallelDims d = dims_of(std::string(spec->id), world);
    EXPECT_EQ(d.product(), world) << spec->id;
    EXPECT_EQ(d.data_parallel(), world) << spec->id;
  }
}

TEST(ConfigMesh, ModelParallelDegreesDivideTheWorldAndTheUnbuiltOnesAreRefused) {
  const auto error = [](std::vector<std::string> overrides, int64_t world) {
    return error_of([&] { load_config_text("", overrides, world); });
  };
  // The data-parallel size is the world over the model-parallel degrees.
  Config c = load_config_text("", {"train.global_batch=16"}, 4);
  EXPECT_EQ(data_parallel_size(c), 4);
  c.parallel.tp = 2;
  EXPECT_EQ(data_parallel_size(c), 2);
  c.parallel.pp = 2;
  EXPECT_EQ(data_parallel_size(c), 1);
  // A product that does not divide the world names every degree and the rule.
  const std::string e = error({"parallel.tp=2"}, 3);
  EXPECT_NE(e.find("parallel.pp(1) * parallel.cp(1) * parallel.tp(2) = 2 does not divide world_size(3)"),
            std::string::npos)
      << e;
  EXPECT_NE(error({"parallel.pp=4"}, 2).find("does not divide world_size(2)"), std::string::npos);
  // A degree that divides is refused as not built yet, naming the key (tensor and pipeline parallelism are built).
  for (const std::string key : {"parallel.cp", "parallel.ep"}) {
    const std::string text = error({key + "=2", "train.global_batch=8"}, 4);
    EXPECT_NE(text.find(key + "=2: "), std::string::npos) << text;
    EXPECT_NE(text.find("not built yet"), std::string::npos) << text;
  }
  EXPECT_NE(error({"parallel.tp=0"}, 1).find("parallel.tp=0 must be"), std::string::npos);
  EXPECT_EQ(error({"parallel.tp=1", "parallel.pp=1", "parallel.cp=1", "parallel.ep=1"}, 2), "(no error)");
}

// parallel.tp > 1: every split dimension of the model divides by tp, whole key/value heads per rank, the placement of
// tp inside or across nodes; each refusal names the key and the rule. The tiny preset: 4 heads, 2 key/value heads, ffn
// 172, vocab 256.
TEST(ConfigMesh, TensorParallelDegreesSplitEveryDimensionItCuts) {
  const auto error = [](std::vector<std::string> overrides, int64_t world) {
    overrides.insert(overrides.begin(), {"model.preset=tiny", "train.global_batch=8", "train.micro_batch=4"});
    return error_of([&] { load_config_text("", overrides, world); });
  };
  EXPECT_EQ(error({"parallel.tp=2"}, 2), "(no error)");
  EXPECT_EQ(error({"parallel.tp=2"}, 4), "(no error)");  // tp 2 x dp 2
  EXPECT_EQ(error({"parallel.tp=4", "model.n_kv_heads=4"}, 4), "(no error)");
  const std::string kv = error({"parallel.tp=4"}, 4);
  EXPECT_NE(kv.find("model.n_kv_heads=2 < parallel.tp=4"), std::string::npos) << kv;
  EXPECT_NE(kv.find("choose parallel.tp <= n_kv_heads"), std::string::npos) << kv;
  const std::string heads = error({"parallel.tp=2", "model.n_heads=3", "model.n_kv_heads=1", "model.d_model=48"}, 2);
  EXPECT_NE(heads.find("model.n_heads=3 is not divisible by parallel.tp=2"), std::string::npos) << heads;
  const std::string ffn = error({"parallel.tp=2", "model.ffn_hidden=171"}, 2);
  EXPECT_NE(ffn.find("model.ffn_hidden=171 is not divisible by parallel.tp=2"), std::string::npos) << ffn;
  const std::string vocab = error({"parallel.tp=2", "model.vocab_size=255"}, 2);
  EXPECT_NE(vocab.find("model.vocab_size=255 is not divisible by parallel.tp=2"), std::string::npos) << vocab;
  EXPECT_EQ(error({"parallel.tp=2", "checkpoint.dir=/tmp/x"}, 2), "(no error)");  // slices saved as N-D chunks
  // The mesh: tp innermost, the rest data parallel.
  const DeviceMesh mesh = device_mesh(
      load_config_text("", {"model.preset=tiny", "parallel.tp=2", "train.global_batch=8", "train.micro_batch=4"}, 4));
  EXPECT_EQ(mesh.groups({MeshDim::tp}), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(mesh.groups(kDataParallelDims), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_FALSE(mesh.spans_nodes(MeshDim::tp, 2));
  // parallel.tp_placement=inter_node: tp outside the data-parallel dimensions, each tp group across the two nodes.
  const std::vector<std::string> inter = {"model.preset=tiny", "parallel.tp=2", "parallel.tp_placement=inter_node",
                                          "train.global_batch=8", "train.micro_batch=4"};
  const DeviceMesh across = device_mesh(load_config_text("", inter, 4));
  EXPECT_EQ(across.groups({MeshDim::tp}), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(across.groups(kDataParallelDims), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(across.spans_nodes(MeshDim::tp, 2));
  EXPECT_FALSE(across.spans_nodes(MeshDim::dp_shard, 2));
  EXPECT_NE(across.describe().find("(tp across dp)"), std::string::npos) << across.describe();
  // pp stays outermost: pp 2 x tp 2 x dp 2 puts each stage's tp groups across its dp pairs.
  const DeviceMesh stages(ParallelDims{.pp = 2, .dp_shard = 2, .tp = 2, .tp_outside_data_parallel = true}, 8);
  EXPECT_EQ(stages.groups({MeshDim::tp}), (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(stages.groups({MeshDim::pp}), (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Refused where nothing would move, naming the key and the rule.
  const std::string alone = error({"parallel.tp_placement=inter_node"}, 2);
  EXPECT_NE(alone.find("parallel.tp_placement=inter_node needs parallel.tp > 1 and more than one data-parallel rank"),
            std::string::npos)
      << alone;
  const std::string no_dp = error({"parallel.tp=2", "parallel.tp_placement=inter_node"}, 2);
  EXPECT_NE(no_dp.find("world 2 / (pp * cp * tp) = 1"), std::string::npos) << no_dp;
  EXPECT_NE(error({"parallel.tp=2", "parallel.tp_placement=across"}, 4).find("parallel.tp_placement"),
            std::string::npos);
}

// parallel.pp > 1: ddp, zero1 and fsdp_no_shard (whole stage parameters), no tp, no tied embeddings; the schedule's
// own rules (m >= P, m % P for interleaving, v only with it) and the split's; the pipeline keys refused at pp = 1.
// Each names key and rule.
TEST(ConfigMesh, PipelineKeysAreCheckedWithTheirRules) {
  const auto error = [](std::vector<std::string> overrides, int64_t world) {
    overrides.insert(overrides.begin(), {"model.preset=tiny", "train.global_batch=8", "parallel.strategy=ddp"});
    return error_of([&] { load_config_text("", overrides, world); });
  };
  EXPECT_EQ(error({"parallel.pp=2", "train.micro_batch=2"}, 2), "(no error)");  // m = 4
  EXPECT_EQ(error({"parallel.pp=2", "train.micro_batch=2"}, 4), "(no error)");  // pp 2 x dp 2, m = 2
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << text;
  };
  // Every data-parallel strategy of the catalogue runs under stages; the sharded ones over each stage's dp ranks.
  for (const char* dp : {"parallel.strategy=zero1", "parallel.strategy=fsdp_no_shard",
                         "parallel.strategy=fsdp_full_shard", "parallel.strategy=fsdp_shard_grad_op"})
    EXPECT_EQ(error({"parallel.pp=2", dp, "train.micro_batch=2"}, 4), "(no error)") << dp;
  EXPECT_EQ(
      error({"parallel.pp=2", "parallel.strategy=fsdp_hybrid", "parallel.shard_size=2", "train.micro_batch=1"}, 8),
      "(no error)");
  // A shard group must tile the stage's data-parallel ranks, not only the world (pp 2 over 2 ranks leaves one).
  EXPECT_TRUE(
      has(error({"parallel.pp=2", "parallel.strategy=fsdp_hybrid", "parallel.shard_size=2", "train.micro_batch=2"}, 2),
          "parallel.shard_size=2 does not divide the data-parallel ranks=1"));
  EXPECT_TRUE(has(error({"parallel.pp=2", "parallel.strategy=single", "train.micro_batch=2"}, 2),
                  "parallel.strategy=single with parallel.pp=2: this strategy cannot run under pipeline stages"));
  // pp x tp: pp 2 x tp 2 (dp 1, m = 4), and the 3-D pp 2 x dp 2 x tp 2 (m = 2), with checkpoints.
  EXPECT_EQ(error({"parallel.pp=2", "parallel.tp=2", "train.micro_batch=2"}, 4), "(no error)");
  EXPECT_EQ(error({"parallel.pp=2", "parallel.tp=2", "parallel.sequence_parallel=true", "train.micro_batch=2"}, 8),
            "(no error)");
  EXPECT_EQ(error({"parallel.pp=2", "parallel.tp=2", "train.micro_batch=2", "checkpoint.dir=/tmp/x"}, 4), "(no error)");
  EXPECT_TRUE(has(error({"parallel.pp=2", "model.tie_embeddings=true", "train.micro_batch=2"}, 2),
                  "model.tie_embeddings=true with parallel.pp=2"));
  EXPECT_EQ(error({"parallel.pp=2", "checkpoint.dir=/tmp/x", "train.micro_batch=2"}, 2), "(no error)");
  // m = 1 < P = 2: 1f1b refuses, gpipe runs.
  EXPECT_TRUE(has(error({"parallel.pp=2", "train.micro_batch=8"}, 2),
                  "parallel.pp_schedule=1f1b with parallel.pp=2 and train.accumulation=1"));
  EXPECT_EQ(error({"parallel.pp=2", "train.micro_batch=8", "parallel.pp_schedule=gpipe"}, 2), "(no error)");
  EXPECT_TRUE(has(error({"parallel.pp=2", "train.micro_batch=2", "parallel.pp_virtual_stages=2"}, 2),
                  "only interleaved_1f1b interleaves"));
  EXPECT_TRUE(has(error({"parallel.pp=2", "train.micro_batch=2", "parallel.pp_schedule=interleaved_1f1b",
                         "parallel.pp_virtual_stages=2"},
                        2),
                  "model.n_layers=2 < 4 pipeline virtual stages"));
  EXPECT_TRUE(has(error({"parallel.pp=2", "train.micro_batch=2", "parallel.pp_split=5"}, 2),
                  "boundary 5 must be greater than the one before (or 0) and below model.n_layers=2"));
  EXPECT_TRUE(has(error({"parallel.pp=2", "train.micro_batch=2", "parallel.pp_schedule=zero_bubble",
                         "parallel.activation_checkpointing=full"},
                        2),
                  "with parallel.pp_schedule=zero_bubble"));
  EXPECT_TRUE(has(error({"parallel.pp_virtual_stages=2", "train.micro_batch=2"}, 2),
                  "parallel.pp_virtual_stages=2 needs parallel.pp > 1"));
  EXPECT_TRUE(
      has(error({"parallel.pp_split=1", "train.micro_batch=2"}, 2), "parallel.pp_split=1 needs parallel.pp > 1"));
  EXPECT_TRUE(has(error({"parallel.pp=2", "parallel.pp_schedule=2f2b", "train.micro_batch=2"}, 2),
                  "parallel.pp_schedule=2f2b must be one of"));
  // The mesh: pp outermost, so each pp group's ranks are a world apart over the data-parallel ranks.
  const DeviceMesh mesh = device_mesh(load_config_text(
      "",
      {"model.preset=tiny", "parallel.strategy=ddp", "parallel.pp=2", "train.global_batch=8", "train.micro_batch=2"},
      4));
  EXPECT_EQ(mesh.groups({MeshDim::pp}), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
}

// The config floor knows no strategy: parallel.strategy's values and those that may run under pipeline stages are
// the ones handed in (the catalogue's, through strategies/catalog.hpp; here a made-up pair).
TEST(ConfigStrategies, AreTheOnesHandedIn) {
  const StrategyChoices made_up{.ids = {"alpha", "beta"}, .under_pipeline = {"beta"}, .reshard_under_pipeline = {}};
  const auto error = [&](std::vector<std::string> overrides, const StrategyChoices& choices) {
    return error_of([&] { load_config("", overrides, 2, choices); });
  };
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  EXPECT_EQ(load_config("", {"parallel.strategy=alpha"}, 2, made_up).parallel.strategy, "alpha");
  EXPECT_TRUE(has(error({"parallel.strategy=ddp"}, made_up), "parallel.strategy=ddp must be one of alpha | beta"));
  EXPECT_TRUE(has(error({"parallel.strategy=alpa"}, made_up), "did you mean 'alpha'?"));
  const std::vector<std::string> piped = {"parallel.pp=2", "train.global_batch=8", "train.micro_batch=1"};
  std::vector<std::string> alpha_piped = piped, beta_piped = piped;
  alpha_piped.push_back("parallel.strategy=alpha");
  beta_piped.push_back("parallel.strategy=beta");
  EXPECT_EQ(error(beta_piped, made_up), "(no error)");
  const std::string refused = error(alpha_piped, made_up);
  EXPECT_TRUE(has(refused, "parallel.strategy=alpha with parallel.pp=2: this strategy cannot run under pipeline"));
  EXPECT_TRUE(has(refused, "use beta")) << refused;
  // Re-gathering per micro-batch: only the ids handed in as able to, and only under stages.
  beta_piped.push_back("parallel.pp_reshard_after_forward=true");
  const std::string not_able = error(beta_piped, made_up);
  EXPECT_TRUE(has(not_able,
                  "parallel.pp_reshard_after_forward=true with parallel.strategy=beta: only a strategy that "
                  "frees each unit's parameters after its forward"))
      << not_able;
  StrategyChoices regathering = made_up;
  regathering.reshard_under_pipeline = {"beta"};
  EXPECT_EQ(error(beta_piped, regathering), "(no error)");
  EXPECT_TRUE(has(error({"parallel.strategy=beta", "parallel.pp_reshard_after_forward=true"}, regathering),
                  "parallel.pp_reshard_after_forward=true needs parallel.pp > 1"));
  EXPECT_TRUE(has(error({}, StrategyChoices{}), "no strategy was handed to config validation")) << error({}, {});
  // The catalogue's own entry points hand in this build's strategies.
  EXPECT_EQ(strategy_choices().ids, strategy_ids());
  EXPECT_EQ(strategy_choices().reshard_under_pipeline, (std::vector<std::string>{"fsdp_full_shard", "fsdp_hybrid"}));
  EXPECT_TRUE(has(error_of([] { load_config("", {"parallel.strategy=alpha"}, 2); }), "one of single | ddp"));
}

}  // namespace
}  // namespace dtlab
