// cost_plan_test.cpp: DDP bucket layout (RELIABILITY A5: the reverse-order walk) and the cost plans of
// single and ddp against the real strategies' bytes.
#include <gtest/gtest.h>

#include "lab/model.hpp"
#include "lab/train/trainer.hpp"
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

TEST(CostPlan, SingleStateBytesEqualTheStrategysExactly) {
  for (const std::string opt : {"adamw", "sgd", "adamw bf16"}) {
    const bool bf16 = opt == "adamw bf16";
    Config c = tiny({"train.optimizer=" + opt.substr(0, opt.find(' ')), "train.steps=1", "train.warmup_steps=0",
                     bf16 ? "precision.param_dtype=bf16" : "precision.param_dtype=fp32"});
    auto strategy = make_strategy("single");
    SingleProcessWorld world;
    TrainOptions o;
    o.print_steps = o.print_config = false;
    train(c, *strategy, world, o);
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

}  // namespace
}  // namespace dtlab
