// sharded_cost_test.cpp: the cost plans of the sharded strategies (strategies/sharded_plan.cpp) against
// hand-computed units, padding, state bytes and collectives, and the per-rank ring volumes of
// docs/cost-models.md "Formulas" (RS/AG (p-1)/p·S, AR 2(p-1)/p·S; Gloo's backend RS moves AR volume). The real
// strategies' bytes are checked against these plans over processes in tests/strategy/memory_test.cpp.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "strategies/sharded/sharding.hpp"
#include "strategies/sharded_plan.hpp"

namespace dtlab {
namespace {

Config make(const std::string& strategy, int world, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"model.preset=tiny", "train.global_batch=8",
                                "train.micro_batch=" + std::to_string(8 / world), "parallel.strategy=" + strategy};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("", o, world);
}

const std::vector<std::string> kPaddedShape = {"model.d_model=42", "model.n_heads=3", "model.n_kv_heads=1",
                                               "model.ffn_hidden=113"};

// tiny: embedding 256·64 = 16384; block 64 + 4096 + 2048 + 2048 + 4096 + 64 + 3·11008 = 45440;
// head 64 + 16384 = 16448; Ψ = 123712.
constexpr int64_t kEmb = 16384, kBlock = 45440, kHead = 16448, kPsi = kEmb + 2 * kBlock + kHead;
// padded shape (d 42, 3 heads of 14, 1 kv head, ffn 113): embedding 10752; block 42 + 1764 + 588 + 588 +
// 1764 + 42 + 3·4746 = 19026; head 42 + 10752 = 10794; Ψ = 59598. At F = 4: block padded 19028 (shard
// 4757, 2 padding elements on rank 3), head padded 10796 (shard 2699, 2 padding on rank 3).
constexpr int64_t kPEmb = 10752, kPBlock = 19026, kPHead = 10794, kPPsi = kPEmb + 2 * kPBlock + kPHead;

// Per-rank ring volume of the step's collectives (bytes each rank sends), float32 only (the 8-byte
// grad-norm all-reduce is checked on its own).
double ring_volume(const CostPlan& plan) {
  double v = 0;
  for (const auto& c : plan.collectives) {
    if (c.phase == "setup" || c.dtype != "float32") continue;
    const double p = c.group_size, one = (p - 1) / p;
    const bool all_reduce_volume = c.op == "all_reduce" || (c.op == "reduce_scatter" && c.algorithm == "backend");
    v += static_cast<double>(c.count) * static_cast<double>(c.bytes) * (all_reduce_volume ? 2 * one : one);
  }
  return v;
}

int64_t count_of(const CostPlan& plan, const std::string& op, const std::string& phase = "") {
  int64_t n = 0;
  for (const auto& c : plan.collectives)
    if (c.op == op && (phase.empty() || c.phase == phase)) n += c.count;
  return n;
}

TEST(ShardedCost, FullShardTinyWorld2ByHand) {
  const CostPlan plan = cost_plan(make("fsdp_full_shard", 2), 0);
  EXPECT_EQ(plan.strategy, "fsdp_full_shard");
  const int64_t shards = (kEmb + 2 * kBlock + kHead) / 2;  // every unit divides by 2: no padding
  EXPECT_EQ(plan.state.params, shards * 4);
  EXPECT_EQ(plan.state.grads, shards * 4);
  EXPECT_EQ(plan.state.optimizer, shards * 8);
  // RS outputs + the worst moment, block.1's backward: its parameters and gradient, block.0 prefetched and the
  // head's gradient, its reduce-scatter still in flight.
  EXPECT_EQ(plan.state.buffers, shards * 4 + (3 * kBlock + kHead) * 4);
  // 4 units: 4 forward gathers, 3 backward (not the head), 4 reduce-scatters, 1 grad-norm all-reduce.
  EXPECT_EQ(count_of(plan, "all_gather", "forward"), 4);
  EXPECT_EQ(count_of(plan, "all_gather", "backward"), 3);
  EXPECT_EQ(count_of(plan, "reduce_scatter"), 4);
  EXPECT_EQ(count_of(plan, "all_reduce"), 1);
  EXPECT_EQ(plan.step_bytes(), kPsi * 4 + (kPsi - kHead) * 4 + kPsi * 4 + 8);
  for (const auto& c : plan.collectives) {
    if (c.op == "all_reduce") {
      EXPECT_EQ(c.bytes, 8);
      EXPECT_EQ(c.dtype, "float64");
    } else {
      EXPECT_EQ(c.group_size, 2);
    }
    if (c.op == "reduce_scatter") {
      EXPECT_EQ(c.algorithm, "ring");
    }
  }
  // No prefetch: block.0's backward, its parameters and gradient, and block.1's gradient in flight.
  const CostPlan no_prefetch = cost_plan(make("fsdp_full_shard", 2, {"parallel.prefetch=false"}), 0);
  EXPECT_EQ(no_prefetch.state.buffers, shards * 4 + 3 * kBlock * 4);
}

TEST(ShardedCost, AccumulationMultipliesPerMicroStepCollectives) {
  // world 2, micro 2: 2 micro-steps. full_shard gathers and reduce-scatters every micro-step.
  const CostPlan plan = cost_plan(make("fsdp_full_shard", 2, {"train.micro_batch=2"}), 0);
  EXPECT_EQ(count_of(plan, "all_gather"), 2 * 7);
  EXPECT_EQ(count_of(plan, "reduce_scatter"), 2 * 4);
  // zero1 and no_shard communicate on the last micro-step only.
  EXPECT_EQ(count_of(cost_plan(make("zero1", 2, {"train.micro_batch=2"})), "reduce_scatter"), 4);
  EXPECT_EQ(count_of(cost_plan(make("fsdp_no_shard", 2, {"train.micro_batch=2"})), "all_reduce"), 4);
}

TEST(ShardedCost, PaddingAtWorld4DependsOnTheRank) {
  const Config c = make("fsdp_full_shard", 4, kPaddedShape);
  const int64_t shards = kPEmb / 4 + 4757 + 4757 + 2699;  // incl. padding, the same on every rank
  for (int rank = 0; rank < 4; ++rank) {
    const CostPlan plan = cost_plan(c, rank);
    EXPECT_EQ(plan.state.params, shards * 4) << rank;
    EXPECT_EQ(plan.state.grads, shards * 4) << rank;
    // rank 3 holds the 2 + 2 + 2 padding elements (two blocks, the head): no optimizer state for them.
    const int64_t non_padding = rank == 3 ? shards - 6 : shards;
    EXPECT_EQ(plan.state.optimizer, non_padding * 8) << rank;
  }
  int64_t optimizer_elements = 0;
  for (int rank = 0; rank < 4; ++rank) optimizer_elements += cost_plan(c, rank).state.optimizer / 8;
  EXPECT_EQ(optimizer_elements, kPPsi);  // every parameter element once, padding never
  // Gathers and reduce-scatters move padded units.
  const CostPlan plan = cost_plan(c, 0);
  const int64_t padded = kPEmb + 2 * 19028 + 10796;
  EXPECT_EQ(plan.step_bytes(), padded * 4 + (padded - 10796) * 4 + padded * 4 + 8);
  EXPECT_THROW(cost_plan(c, 4), std::invalid_argument);
}

TEST(ShardedCost, Zero1AndNoShardStateByHand) {
  const Config z = make("zero1", 4, kPaddedShape);
  const int64_t padded = kPEmb + 2 * 19028 + 10796;
  const CostPlan rank3 = cost_plan(z, 3);
  EXPECT_EQ(rank3.state.params, padded * 4);  // full (padded) parameters on every rank
  EXPECT_EQ(rank3.state.grads, padded * 4);
  // fp32 gradient shard + RS output: 2 x padded/4 elements x 4 B; the all-gathers' source buffer, the largest
  // shard (a block's, 4757 elements).
  EXPECT_EQ(rank3.state.buffers, 2 * padded + 4757 * 4);
  EXPECT_EQ(rank3.state.optimizer, (padded / 4 - 6) * 8);
  EXPECT_EQ(count_of(rank3, "reduce_scatter"), 4);
  EXPECT_EQ(count_of(rank3, "all_gather", "optimizer"), 4);

  const CostPlan ns = cost_plan(make("fsdp_no_shard", 4, kPaddedShape), 3);
  EXPECT_EQ(ns.state.params, kPPsi * 4);  // F = 1: no padding
  EXPECT_EQ(ns.state.grads, kPPsi * 4);
  EXPECT_EQ(ns.state.optimizer, kPPsi * 8);
  EXPECT_EQ(ns.state.buffers, 0);
  EXPECT_EQ(ns.step_bytes(), kPPsi * 4);  // one all-reduce per unit, no grad-norm all-reduce
  EXPECT_EQ(count_of(ns, "all_reduce"), 4);

  // SGD with momentum: 4 bytes of state per element; offload adds the separate (host) master shard to
  // params and its compute-side copy to buffers.
  const CostPlan sgd = cost_plan(make("zero1", 4, {"train.optimizer=sgd", "parallel.offload=true"}), 0);
  EXPECT_EQ(sgd.state.optimizer, kPsi / 4 * 4);
  EXPECT_EQ(sgd.state.params, kPsi * 4 + kPsi / 4 * 4);
  EXPECT_EQ(sgd.state.buffers, 3 * (kPsi / 4) * 4);
}

TEST(ShardedCost, MixedPrecisionDtypesAndBytes) {
  // bf16 compute and reduce, fp32 master: gathers and reduce-scatters move 2-byte elements; the master
  // shard stays fp32 and needs a bf16 compute-side copy.
  const CostPlan plan =
      cost_plan(make("fsdp_full_shard", 2, {"precision.param_dtype=bf16", "precision.reduce_dtype=bf16"}), 0);
  for (const auto& c : plan.collectives)
    if (c.op != "all_reduce") {
      EXPECT_EQ(c.dtype, "bfloat16") << c.what;
    }
  EXPECT_EQ(plan.step_bytes(), kPsi * 2 + (kPsi - kHead) * 2 + kPsi * 2 + 8);
  const int64_t shards = kPsi / 2;
  EXPECT_EQ(plan.state.params, shards * 4);
  EXPECT_EQ(plan.state.grads, shards * 4);
  EXPECT_EQ(plan.state.buffers, shards * 2 + shards * 2 + (3 * kBlock + kHead) * 2);
  // bf16 compute, fp32 reduce: fp32 wire copies of the gradients. The worst moment moves to block.0's backward: its
  // parameters and gradient, the embedding prefetched, block.1's gradient and its fp32 wire copy (the reduce-scatter
  // in flight), measured so by memory_rank.
  const CostPlan wire = cost_plan(make("fsdp_full_shard", 2, {"precision.param_dtype=bf16"}), 0);
  EXPECT_EQ(wire.state.buffers, shards * 4 + shards * 2 + (2 * kBlock + kEmb + kBlock) * 2 + kBlock * 4);
  // no_shard all-reduces every unit's wire copy at once, after backward: all of them; zero1 one at a time.
  const CostPlan no_shard = cost_plan(make("fsdp_no_shard", 2, {"precision.param_dtype=bf16"}), 0);
  const CostPlan zero1 = cost_plan(make("zero1", 2, {"precision.param_dtype=bf16"}), 0);
  const CostPlan no_shard_fp32 = cost_plan(make("fsdp_no_shard", 2), 0);
  const CostPlan zero1_fp32 = cost_plan(make("zero1", 2), 0);
  // no_shard (F = 1): fp32 gradient shard 4Ψ + bf16 compute copy 2Ψ + every wire copy 4Ψ.
  EXPECT_EQ(no_shard.state.buffers, kPsi * 4 + kPsi * 2 + kPsi * 4);
  // zero1: beyond fp32's, the bf16 compute copy of the master shard and the largest wire copy; the all-gathers
  // after the optimizer step send that copy, so fp32's source buffer (a block's shard) is not needed.
  EXPECT_EQ(zero1.state.buffers - zero1_fp32.state.buffers, shards * 2 + kBlock * 4 - kBlock / 2 * 4);
  EXPECT_EQ(no_shard_fp32.state.buffers, 0);
}

TEST(ShardedCost, ShardGradOpAndWrapPolicies) {
  const CostPlan sgo = cost_plan(make("fsdp_shard_grad_op", 2), 0);
  EXPECT_EQ(count_of(sgo, "all_gather"), 4);  // forward only: kept through backward
  EXPECT_EQ(count_of(sgo, "reduce_scatter"), 4);
  // RS outputs + the worst moment, block.1's backward: embedding, both blocks, block.1's gradient and the head's,
  // its reduce-scatter in flight (the head's parameters are released once its own backward has run).
  EXPECT_EQ(sgo.state.buffers, kPsi / 2 * 4 + (kEmb + 3 * kBlock + kHead) * 4);
  // every_2 (2 layers): embedding, block.0+block.1, head; wrap=model: one unit.
  const CostPlan every2 = cost_plan(make("fsdp_full_shard", 2, {"parallel.wrap=every_2"}), 0);
  EXPECT_EQ(count_of(every2, "reduce_scatter"), 3);
  bool found = false;
  for (const auto& c : every2.collectives) found |= c.what.find("unit block.0+block.1 ") != std::string::npos;
  EXPECT_TRUE(found);
  const CostPlan model = cost_plan(make("fsdp_full_shard", 2, {"parallel.wrap=model"}), 0);
  EXPECT_EQ(count_of(model, "all_gather"), 1);                  // the only unit is also the last: no backward re-gather
  EXPECT_EQ(model.state.buffers, kPsi / 2 * 4 + 2 * kPsi * 4);  // its parameters and gradients: no neighbour
  // every_2: the blocks' unit's backward holds it, its gradient, the embedding, prefetched, and the head's gradient.
  EXPECT_EQ(every2.state.buffers, kPsi / 2 * 4 + (4 * kBlock + kEmb + kHead) * 4);
}

TEST(ShardedCost, RingVolumesFollowTheFormulas) {
  for (const int p : {2, 4}) {
    const double one = (p - 1.0) / p, bytes = kPsi * 4.0;
    const double ddp = ring_volume(cost_plan(make("ddp", p)));
    EXPECT_DOUBLE_EQ(ddp, 2 * one * bytes);
    // FULL_SHARD: 3(p-1)/p·Ψb = 1.5x DDP, less the head's backward re-gather the engine skips.
    const double fs = ring_volume(cost_plan(make("fsdp_full_shard", p)));
    EXPECT_DOUBLE_EQ(fs, 3 * one * bytes - one * kHead * 4.0);
    EXPECT_GT(fs / ddp, 1.4);
    EXPECT_LT(fs / ddp, 1.5);
    // ZeRO-1, SHARD_GRAD_OP and NO_SHARD: the DDP volume.
    EXPECT_DOUBLE_EQ(ring_volume(cost_plan(make("zero1", p))), ddp);
    EXPECT_DOUBLE_EQ(ring_volume(cost_plan(make("fsdp_shard_grad_op", p))), ddp);
    EXPECT_DOUBLE_EQ(ring_volume(cost_plan(make("fsdp_no_shard", p))), ddp);
  }
  // HYBRID F = 2, R = 2: 3(F-1)/F·Ψb (less the head's re-gather) + 2(R-1)/R·(Ψ/F)b.
  const CostPlan hybrid = cost_plan(make("fsdp_hybrid", 4, {"parallel.shard_size=2"}), 1);
  EXPECT_DOUBLE_EQ(ring_volume(hybrid), 3 * 0.5 * kPsi * 4.0 - 0.5 * kHead * 4.0 + 2 * 0.5 * (kPsi / 2) * 4.0);
  EXPECT_EQ(hybrid.state.params, kPsi / 2 * 4);
  // Gloo's backend reduce-scatter moves all-reduce volume: full_shard becomes 2x DDP (less the head).
  const Config backend = make("fsdp_full_shard", 4, {"parallel.reduce_scatter=backend"});
  EXPECT_DOUBLE_EQ(ring_volume(cost_plan(backend)), 4 * 0.75 * kPsi * 4.0 - 0.75 * kHead * 4.0);
  for (const auto& c : cost_plan(backend).collectives)
    if (c.op == "reduce_scatter") {
      EXPECT_NE(c.what.find("all-reduce volume"), std::string::npos);
    }
}

TEST(ShardedCost, HybridGroupsAndDispatch) {
  const Config c = make("fsdp_hybrid", 4, {"parallel.shard_size=2"});
  const CostPlan plan = cost_plan(c, 1);
  EXPECT_EQ(plan.strategy, "fsdp_hybrid");
  int replica_reduces = 0;
  for (const auto& x : plan.collectives) {
    if (x.op == "all_gather" || x.op == "reduce_scatter") {
      EXPECT_EQ(x.group_size, 2);
    }
    if (x.phase == "after-backward" && x.dtype == "float32") {
      ++replica_reduces;
      EXPECT_EQ(x.group_size, 2);
    }
  }
  EXPECT_EQ(replica_reduces, 4);
  // shard_size 0 = world: plain full_shard, no replica all-reduce.
  const CostPlan whole = cost_plan(make("fsdp_hybrid", 4, {"parallel.shard_size=0"}), 0);
  EXPECT_EQ(whole.step_bytes(), cost_plan(make("fsdp_full_shard", 4), 0).step_bytes());
  for (const std::string id : {"fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_no_shard", "zero1"})
    EXPECT_EQ(cost_plan(make(id, 2), 1).strategy, id);
  EXPECT_EQ(cost_plan(make("fsdp_full_shard", 2)).strategy, "fsdp_full_shard");  // rank 0
}

// HYBRID's automatic shard group (parallel.shard_size=0) is the data-parallel ranks of one node: on 2 nodes x 4 with
// tp 2 inside each node that is 2 of them; with the tp groups across the nodes (tp_placement=inter_node) all 4.
TEST(ShardedCost, HybridsAutomaticShardGroupIsTheDataParallelRanksOfANode) {
  const auto shard_size = [](const std::string& placement) {
    Config c =
        make("fsdp_hybrid", 8,
             {"parallel.tp=2", "parallel.shard_size=0", "train.micro_batch=2", "parallel.tp_placement=" + placement});
    c.ranks_per_node = 4;
    return sharded_dp_shard_size_of(ShardingMode::hybrid, c, 4);
  };
  EXPECT_EQ(shard_size("intra_node"), 2);
  EXPECT_EQ(shard_size("inter_node"), 4);
}

// parallel.collectives=hierarchical on 2 nodes x 2 (lab/comm/hierarchical.hpp): every gather is one call across the
// nodes (1/K of the unit among the M ranks of one local rank, stride K) then one inside the node; every reduce-scatter
// the other way round, both on the lab's ring. The two levels of one call name the same unit. Only 1/K of each
// buffer crosses the nodes per rank; rank r holds chunk l*M + m, so its state is the flat plan's for that chunk.
TEST(ShardedCost, HierarchicalCollectivesGoInTwoLevelsPerUnit) {
  for (const std::string id : {"fsdp_full_shard", "fsdp_shard_grad_op", "zero1"}) {
    SCOPED_TRACE(id);
    Config c = make(id, 4, kPaddedShape);
    c.ranks_per_node = 2;
    Config flat = c;
    c.parallel.collectives = "hierarchical";
    const CostPlan plan = cost_plan(c, 1);
    int64_t across = 0, inside = 0, flat_sharded_bytes = 0;
    for (const auto& x : cost_plan(flat, 1).collectives)
      if (x.op == "all_gather" || x.op == "reduce_scatter") flat_sharded_bytes += x.bytes * x.count;
    for (size_t i = 0; i < plan.collectives.size(); ++i) {
      const PlannedCollective& x = plan.collectives[i];
      if (x.op != "all_gather" && x.op != "reduce_scatter") continue;
      ASSERT_GE(x.unit, 0) << x.what;
      EXPECT_EQ(x.algorithm, x.op == "all_gather" ? "backend" : "ring") << x.what;
      const bool first_level = i + 1 < plan.collectives.size() && plan.collectives[i + 1].unit == x.unit &&
                               plan.collectives[i + 1].op == x.op && plan.collectives[i + 1].phase == x.phase;
      const bool crosses = x.stride == 2;
      EXPECT_EQ(crosses, (x.op == "all_gather") == first_level) << x.what << ": gathers cross first, scatters last";
      EXPECT_EQ(x.group_size, 2) << x.what;
      (crosses ? across : inside) += x.bytes * x.count;
    }
    EXPECT_EQ(inside, flat_sharded_bytes) << "inside the node: the whole unit, as the flat call";
    EXPECT_EQ(across * 2, inside) << "across nodes: 1/K of it";
    // Rank r = m*K + l holds chunk l*M + m: ranks 1 and 2 swap chunks; 0 and 3 keep theirs.
    for (const auto& [rank, chunk] : std::vector<std::pair<int, int>>{{0, 0}, {1, 2}, {2, 1}, {3, 3}}) {
      const PlannedState h = cost_plan(c, rank).state, f = cost_plan(flat, chunk).state;
      EXPECT_EQ(h.params, f.params);
      EXPECT_EQ(h.optimizer, f.optimizer) << "rank " << rank << " holds chunk " << chunk;
    }
  }
  // Refused where there is no two-level form, or with Gloo's backend reduce-scatter.
  const auto refusal = [](const std::string& id, std::vector<std::string> extra) {
    try {
      strategy_spec(id).check(make(id, 4, std::move(extra)));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("fsdp_hybrid", {"parallel.collectives=hierarchical"}).find("shard groups are the nodes already"),
            std::string::npos);
  EXPECT_NE(refusal("fsdp_no_shard", {"parallel.collectives=hierarchical"}).find("use flat or auto"),
            std::string::npos);
  EXPECT_NE(refusal("fsdp_full_shard", {"parallel.collectives=hierarchical", "parallel.reduce_scatter=backend"})
                .find("use parallel.reduce_scatter=ring"),
            std::string::npos);
  EXPECT_EQ(refusal("zero1", {"parallel.collectives=hierarchical"}), "accepted");
  // On one node, hierarchical has nothing to split: the plan is flat (the engine refuses such a job).
  Config one_node = make("fsdp_full_shard", 4, {"parallel.collectives=hierarchical"});
  EXPECT_EQ(cost_plan(one_node, 0).step_bytes(), cost_plan(make("fsdp_full_shard", 4), 0).step_bytes());
}

// Under pipeline stages (tiny, pp 2 x dp 2, micro-batch 1: m = 4 per step): rank 0 holds the embedding and block.0 as
// one chunk. Gathered once per step: one gather and one reduce-scatter per unit, both units and their gradients
// alive at the flush. Re-gathering per micro-batch (parallel.pp_reshard_after_forward): a gather for each F and each
// B and a reduce-scatter per micro-batch, each call tagged with its chunk; the peak is one unit's backward, not the
// stage's. Under zero bubble the chunk's B holds every unit until W (strategies/sharded/sharding.hpp).
TEST(ShardedCost, PipelineStagesGatherOncePerStepOrPerMicroBatch) {
  const std::vector<std::string> stages = {"parallel.pp=2", "train.micro_batch=1"};
  const auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), stages.begin(), stages.end());
    return make("fsdp_full_shard", 4, extra);
  };
  const int64_t s_emb = kEmb * 4, s_block = kBlock * 4, outputs = (kEmb + kBlock) / 2 * 4;
  const CostPlan once = cost_plan(with({}), 0);
  EXPECT_EQ(count_of(once, "all_gather"), 2);
  EXPECT_EQ(count_of(once, "reduce_scatter", "after-backward"), 2);
  EXPECT_EQ(once.state.buffers, outputs + 2 * (s_emb + s_block));
  const CostPlan per_micro_batch = cost_plan(with({"parallel.pp_reshard_after_forward=true"}), 0);
  EXPECT_EQ(count_of(per_micro_batch, "all_gather", "forward"), 2 * 4);
  EXPECT_EQ(count_of(per_micro_batch, "all_gather", "backward"), 2 * 4);  // the chunk's last unit too
  EXPECT_EQ(count_of(per_micro_batch, "reduce_scatter", "after-backward"), 2 * 4);
  for (const PlannedCollective& c : per_micro_batch.collectives)
    EXPECT_EQ(c.chunk, c.mesh_dim == "dp" && c.op != "all_reduce" ? 0 : -1) << c.op << " " << c.what;
  // block.0's backward: its parameters and gradient, the embedding prefetched; nothing of another micro-batch.
  EXPECT_EQ(per_micro_batch.state.buffers, outputs + 2 * s_block + s_emb);
  const CostPlan after_w =
      cost_plan(with({"parallel.pp_reshard_after_forward=true", "parallel.pp_schedule=zero_bubble"}), 0);
  EXPECT_EQ(count_of(after_w, "all_gather"), 2 * 2 * 4);
  EXPECT_EQ(after_w.state.buffers, outputs + 2 * (s_emb + s_block));
  // Interleaved over 4 blocks: rank 0 holds {embedding, block.0} and {block.2}; block.2's calls are chunk 1's, and
  // its backward has no neighbour in its chunk to prefetch.
  const CostPlan interleaved =
      cost_plan(with({"parallel.pp_reshard_after_forward=true", "model.n_layers=4",
                      "parallel.pp_schedule=interleaved_1f1b", "parallel.pp_virtual_stages=2"}),
                0);
  int64_t chunk1_calls = 0;
  for (const PlannedCollective& c : interleaved.collectives)
    if (c.chunk == 1) {
      EXPECT_NE(c.what.find("block.2"), std::string::npos) << c.what;
      chunk1_calls += c.count;
    }
  EXPECT_EQ(chunk1_calls, 3 * 4);  // forward gather, backward gather, reduce-scatter, per micro-batch
  EXPECT_EQ(interleaved.state.buffers, (kEmb + 2 * kBlock) / 2 * 4 + 2 * s_block + s_emb);
}

// The per-micro-batch peaks by hand on three made-up units: a, b in chunk 0, c in chunk 1; a's reduce dtype wider
// than its compute dtype (wire = 2 x gathered), b's and c's the same (no wire copy).
TEST(ShardedCost, PerMicroBatchPeaksStayInsideEachChunk) {
  const ShardingTraits full = traits(ShardingMode::full_shard);
  const std::vector<UnitBuffers> units = {{.gathered = 10, .wire = 20, .chunk = 0},
                                          {.gathered = 30, .wire = 0, .chunk = 0},
                                          {.gathered = 50, .wire = 0, .chunk = 1}};
  // Per unit, as without stages but inside a chunk: a's backward 10 + 10 + b's gradient in flight 30 = 50; b's with
  // a prefetched 40 + 30 = 70; c's 50 + 50 = 100, with nothing of chunk 0 prefetched or in flight (that would be
  // b's 40 + 30 + 50 = 120 and c's 80 + 50 = 130).
  EXPECT_EQ(unit_buffers_peak_bytes(full, units, /*prefetch=*/true, PipelineGathers::per_micro_batch), 100);
  EXPECT_EQ(unit_buffers_peak_bytes(full, units, /*prefetch=*/false, PipelineGathers::per_micro_batch), 100);
  // Zero bubble: a chunk whole, 2 x 40 = 80 and 2 x 50 = 100, or its reduce-scatters (a's wire: 10 + 20 = 30).
  EXPECT_EQ(unit_buffers_peak_bytes(full, units, true, PipelineGathers::per_micro_batch_after_w), 100);
  // Once per step: everything through u alive at u's wire copy: 2 x 10 + 20, 2 x 40, 2 x 90 = 180.
  EXPECT_EQ(unit_buffers_peak_bytes(full, units, true, PipelineGathers::once_per_step), 180);
  // Without stages every unit is in chunk 0: c's backward with b prefetched, 80 + 50 = 130.
  std::vector<UnitBuffers> one_chunk = units;
  one_chunk[2].chunk = 0;
  EXPECT_EQ(unit_buffers_peak_bytes(full, one_chunk, true), 130);
}

// The one table of modes that the engine (strategies/sharded/) and the plan both read, as sharding.hpp draws it.
TEST(ShardedCost, TraitsTableMatchesTheSchedules) {
  constexpr ShardingTraits full = traits(ShardingMode::full_shard), grad_op = traits(ShardingMode::shard_grad_op),
                           none = traits(ShardingMode::no_shard), hybrid = traits(ShardingMode::hybrid),
                           zero1 = traits(ShardingMode::zero1);
  static_assert(full.frees_params_after_forward() && full.regathers_in_backward() && !full.params_persist());
  static_assert(grad_op.keeps_all_units_gathered() && !grad_op.regathers_in_backward());
  static_assert(none.params_persist() && none.all_reduces_grads() && none.grads_replicated());
  static_assert(hybrid.frees_params_after_forward() && hybrid.replica_all_reduce);
  static_assert(zero1.params_persist() && zero1.gathers_after_optimizer && zero1.reduce_scatters_grads());
  for (const ShardingTraits& t : {full, grad_op, hybrid})
    EXPECT_TRUE(t.reduce_scatters_every_micro_step() && !t.gathers_after_optimizer);
  EXPECT_FALSE(zero1.reduce_scatters_every_micro_step());
  EXPECT_EQ(shard_group_size(ShardingMode::no_shard, 4, 0), 1);
  EXPECT_EQ(shard_group_size(ShardingMode::zero1, 4, 2), 4);  // shard_size is hybrid's alone
  EXPECT_EQ(shard_group_size(ShardingMode::hybrid, 4, 2), 2);
  EXPECT_EQ(shard_group_size(ShardingMode::hybrid, 4, 0), 4);
  EXPECT_THROW(shard_group_size(ShardingMode::hybrid, 4, 3), std::invalid_argument);
  // Across nodes, hybrid's default shard group is the node; an explicit shard_size still wins; one node = the world.
  EXPECT_EQ(shard_group_size(ShardingMode::hybrid, 6, 0, 3), 3);
  EXPECT_EQ(shard_group_size(ShardingMode::hybrid, 8, 4, 2), 4);
  EXPECT_EQ(shard_group_size(ShardingMode::hybrid, 4, 0, 4), 4);
  EXPECT_EQ(shard_group_size(ShardingMode::full_shard, 4, 0, 2), 4);
}

}  // namespace
}  // namespace dtlab
