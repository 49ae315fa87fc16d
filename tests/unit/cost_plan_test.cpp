// cost_plan_test.cpp: DDP bucket layout (RELIABILITY A5: the reverse-order walk) and the cost plans of
// single and ddp against the real strategies' bytes.
#include <gtest/gtest.h>

#include "lab/model.hpp"
#include "lab/train/tensor_parallel_plan.hpp"
#include "lab/train/trainer.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "strategies/ddp_buckets.hpp"
#include "strategies/registry.hpp"

namespace dtlab {
namespace {

TEST(DdpBucketLayout, ReverseOrderWalkWithCaps) {
  const std::vector<int64_t> bytes = {100, 200, 300, 400};
  // unlimited cap, first bucket capped at 450: [3], then [2, 1, 0]
  EXPECT_EQ(assign_buckets(bytes, 0, 450).buckets, (std::vector<std::vector<int>>{{3}, {2, 1, 0}}));
  // cap of the largest parameter: [3], [2] (300+200 > 400), [1, 0] (200+100 fits)
  EXPECT_EQ(assign_buckets(bytes, 400, 1 << 20).buckets, (std::vector<std::vector<int>>{{3}, {2}, {1, 0}}));
  // cap below every pair: one bucket per parameter, in reverse order
  EXPECT_EQ(assign_buckets(bytes, 250, 1 << 20).buckets, (std::vector<std::vector<int>>{{3}, {2}, {1}, {0}}));
  // cap 500: [3] (400+300 > 500), [2, 1], [0]
  EXPECT_EQ(assign_buckets(bytes, 500, 1 << 20).buckets, (std::vector<std::vector<int>>{{3}, {2, 1}, {0}}));
  // a parameter larger than the cap gets its own bucket
  EXPECT_EQ(assign_buckets({1000, 10}, 100, 100).buckets, (std::vector<std::vector<int>>{{1}, {0}}));
  // every parameter appears exactly once
  auto layout = assign_buckets({5, 5, 5, 5, 5, 5, 5}, 11, 6);
  int count = 0;
  for (const auto& b : layout.buckets) count += static_cast<int>(b.size());
  EXPECT_EQ(count, 7);
}

Config tiny(std::vector<std::string> extra = {}, int world = 1) {
  std::vector<std::string> o = {"model.preset=tiny", "train.global_batch=8", "train.micro_batch=2"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o, world);
}

TEST(CostPlan, ParamShapesMatchTheModel) {
  Config c = tiny();
  GPT model(c.model, 1);
  auto shapes = param_shapes(c.model);
  auto params = model.parameters();
  ASSERT_EQ(shapes.size(), params.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(shapes[i].name, params[i].name);
    EXPECT_EQ(shapes[i].numel, params[i].tensor->numel()) << shapes[i].name;
    EXPECT_EQ(shapes[i].is_norm_or_embedding, params[i].is_norm_or_embedding) << shapes[i].name;
  }
}

// The cost code's layout-aware shapes cut what the tensor-parallel plan cuts (tensor_parallel_axis, the runtime's
// rule): a split tensor holds 1/tp of the model's, a norm stays whole; the data-parallel group is what tp leaves.
TEST(CostPlan, TensorParallelShapesAreTheRuntimePlansSlices) {
  for (const bool tied : {false, true}) {
    const Config c = tiny(
        {"parallel.strategy=ddp", "parallel.tp=2", "model.tie_embeddings=" + std::string(tied ? "true" : "false")}, 4);
    GPT model(c.model, 1);
    const auto shapes = param_shapes(c);
    const auto params = model.parameters();
    ASSERT_EQ(shapes.size(), params.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      const bool split = tensor_parallel_axis(params[i].name) >= 0;
      EXPECT_EQ(shapes[i].name, params[i].name);
      EXPECT_EQ(shapes[i].numel, params[i].tensor->numel() / (split ? 2 : 1)) << shapes[i].name;
      EXPECT_EQ(shapes[i].split_by, split ? "tp" : "") << shapes[i].name;
    }
    EXPECT_EQ(data_parallel_group(c).size, 2);
    EXPECT_EQ(data_parallel_group(c).stride, 2);
    // DDP over the two ranks tp leaves: its buckets carry this rank's slices, over a group of 2 at stride 2.
    int64_t local = 0;
    for (const auto& s : shapes) local += s.numel;
    int64_t bucket_bytes = 0;
    for (const PlannedCollective& p : cost_plan(c, 0).collectives)
      if (p.mesh_dim == "dp" && p.phase == "backward") {
        EXPECT_EQ(p.group_size, 2);
        EXPECT_EQ(p.stride, 2);
        bucket_bytes += p.bytes * p.count;
      }
    EXPECT_EQ(bucket_bytes, local * 4);
  }
}

TEST(CostPlan, SingleStateBytesEqualTheStrategysExactly) {
  for (const std::string opt : {"adamw", "sgd", "adamw bf16"}) {
    const bool bf16 = opt == "adamw bf16";
    Config c = tiny({"train.optimizer=" + opt.substr(0, opt.find(' ')), "train.steps=1", "train.warmup_steps=0",
                     bf16 ? "precision.param_dtype=bf16" : "precision.param_dtype=fp32"});
    auto strategy = make_strategy("single");
    SingleProcessWorld world;
    TrainOptions o;
    o.print_steps = o.print_config = false;
    train(c, *strategy, world, device_mesh(c), o);
    const StateBytes real = strategy->state_bytes();
    const CostPlan plan = cost_plan(c);
    EXPECT_EQ(plan.state.params, real.params) << opt;
    EXPECT_EQ(plan.state.grads, real.grads) << opt;
    EXPECT_EQ(plan.state.optimizer, real.optimizer) << opt;
    EXPECT_EQ(plan.step_bytes(), 0);
  }
}

TEST(CostPlan, DdpAllReducesEveryGradientByteOncePerStep) {
  Config c = tiny({"parallel.strategy=ddp", "parallel.bucket_cap_mb=0.1"}, 2);
  const CostPlan plan = cost_plan(c);
  int64_t numel = 0;
  for (const auto& p : param_shapes(c.model)) numel += p.numel;
  EXPECT_EQ(plan.step_bytes(), numel * 4);
  EXPECT_GT(plan.collectives.size(), 3u);  // setup broadcast + several buckets
  Config bf16 = tiny({"parallel.strategy=ddp", "precision.reduce_dtype=bf16"}, 2);
  EXPECT_EQ(cost_plan(bf16).step_bytes(), numel * 2);
  EXPECT_EQ(cost_plan(bf16).state.buffers, numel * 2);
}

// Across 2 nodes x 2 (parallel.collectives=auto) every bucket goes as the hierarchical all-reduce runs it: per 16 MiB
// piece a ring reduce-scatter and all-gather of the piece inside the node and the all-reduce of this rank's chunk
// across nodes (stride 2); on one node, or with flat, one all-reduce over the world.
TEST(CostPlan, DdpAcrossNodesPlansTheHierarchicalAllReducePerPiece) {
  Config c = tiny({"parallel.strategy=ddp", "parallel.bucket_cap_mb=100"}, 4);
  c.model.vocab_size = 8192;  // an embedding of 8192 x 64: 2 MiB; with every other gradient one bucket
  c.model.d_model = 1024;     // ... of more than 16 MiB: two pieces
  c.model.n_heads = 8;
  c.model.n_kv_heads = 8;
  c.model.ffn_hidden = 2048;
  c.ranks_per_node = 2;
  int64_t numel = 0;
  for (const auto& p : param_shapes(c.model)) numel += p.numel;
  for (int rank : {0, 1}) {
    int64_t gathered = 0, crossing = 0, pieces = 0;
    for (const auto& col : cost_plan(c, rank).collectives) {
      if (col.phase != "backward") continue;
      if (col.op == "reduce_scatter") {
        ++pieces;
        EXPECT_EQ(col.group_size, 2);
        EXPECT_EQ(col.stride, 1);
        EXPECT_LE(col.bytes, int64_t{16} << 20);
      } else if (col.op == "all_gather") {
        gathered += col.bytes;
      } else {
        ASSERT_EQ(col.op, "all_reduce");
        EXPECT_EQ(col.group_size, 2) << "the two nodes";
        EXPECT_EQ(col.stride, 2);
        crossing += col.bytes;
      }
    }
    EXPECT_GE(pieces, 2) << "a bucket over 16 MiB goes in pieces";
    EXPECT_EQ(gathered, numel * 4);
    EXPECT_NEAR(static_cast<double>(crossing), numel * 4 / 2.0, 4.0 * pieces) << "rank " << rank << "'s half";
  }
  c.parallel.collectives = "flat";
  const CostPlan flat = cost_plan(c);
  EXPECT_EQ(flat.step_bytes(), numel * 4);
  for (const auto& col : flat.collectives) {
    if (col.phase == "backward") {
      EXPECT_EQ(col.group_size, 4);
    }
  }
  c.parallel.collectives = "auto";
  c.ranks_per_node = 0;  // one node
  EXPECT_EQ(cost_plan(c).step_bytes(), numel * 4);
}

}  // namespace
}  // namespace dtlab
