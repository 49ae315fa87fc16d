// sharded_plan.cpp: the cost plan of every sharded strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID, ZeRO-1) by
// ShardingMode, torch-free, mirroring strategies/sharded/ (the engine); both read the mode's traits
// (strategies/sharded/sharding.hpp). Each strategy's <id>_cost.cpp calls it.
//
// Units (parallel.wrap) as build_flat_units() makes them: the embedding; the blocks one per unit, or every 2 /
// every 4, or everything in one unit (wrap=model); the final norm with the head. A unit of n elements is
// padded to a multiple of the shard group size F and split into F shards of padded/F elements; shard i
// belongs to rank i of the shard group, so the padding sits at the end of the last ranks' shards. Which
// elements of a shard are padding therefore depends on the rank: the plans take `rank` (global rank;
// the shard rank is rank for full_shard / shard_grad_op / zero1, rank % F for hybrid, 0 for no_shard).
//
// F: world for full_shard / shard_grad_op / zero1, 1 for no_shard, parallel.shard_size (0 = world) for
// hybrid. A = train.accumulation micro-steps per optimizer step.
//
// Collectives per optimizer step (bytes in the nccl-tests convention: the padded unit for all-gather and
// reduce-scatter, the buffer for all-reduce):
//   full_shard     per micro-step: all-gather every unit in forward, again in backward for every unit but
//                  the last (the engine keeps the last unit gathered from its forward into its backward),
//                  reduce-scatter every unit                       -> A·(2n-1) AG + A·n RS
//   shard_grad_op  per micro-step: all-gather every unit in forward (kept through backward),
//                  reduce-scatter every unit                       -> A·n AG + A·n RS
//   no_shard       last micro-step: all-reduce every unit's full gradient
//   hybrid         full_shard inside the shard group (group size F), then (R = world/F > 1) an all-reduce
//                  of every gradient shard across the R replicas
//   zero1          last micro-step: reduce-scatter every unit; after the optimizer: all-gather every unit
// Under pipeline stages (A = m micro-batches) the modes that free parameters gather every unit once per step and
// reduce-scatter it once after the flush (-> n AG + n RS), or with parallel.pp_reshard_after_forward (full_shard,
// hybrid) per micro-batch: gathered for each F and again for each B, the last unit too (-> 2·A·n AG + A·n RS).
// plus, except for no_shard (every rank holds every gradient), the grad-norm all-reduce of one double
// (8 bytes, over the shard group), and with precision.loss_scale=dynamic the found-inf all-reduce of one
// double (over the shard group, or the replicas for no_shard; hybrid with R > 1 also over the replicas).
// Gathers move precision.param_dtype; reduce-scatters and gradient all-reduces precision.reduce_dtype. Not in the plan:
// the trainer's per-step loss all-reduce (8 bytes, the same for every strategy, also absent from the ddp plan). With F
// = 1 the engine copies instead of gathering / reduce-scattering, so those collectives vanish; zero1 still calls its
// all-gather. All-gathers use the backend (Gloo: a ring); reduce-scatters follow parallel.reduce_scatter: ring (the
// lab's ring over send/recv, (p-1)/p·S per rank) or backend (Gloo's reduce_scatter_tensor is an
// all-reduce plus a chunk copy: it moves all-reduce volume, 2(p-1)/p·S per rank).
//
// State per rank: the categories of ShardedEngine::state_bytes(), term by term (c, r, m: bytes per
// element of precision.param_dtype, reduce_dtype, master_dtype; "separate copy" = offload or c != m):
//   full_shard, shard_grad_op, hybrid: params += shard·m; grads += shard·4 (fp32 gradient shards);
//                                      buffers += shard·r (reduce-scatter output)
//   no_shard, zero1: params += padded·c (+ shard·m with a separate copy); grads += padded·c;
//                    buffers += shard·4 unless the gradient shard is full_grad itself (no_shard without a
//                    separate copy and with fp32 reduce); zero1 buffers += shard·r (reduce-scatter output)
//   separate copy: buffers += shard·c (compute-side copy of the master shard)
//   the larger of: a master not fp32's Σ shard·4 (fp32 scratch, alive only through the optimizer step) and the
//   gathered units, their gradients and their wire copies at the worst moment (unit_buffers_peak_bytes,
//   sharding.hpp), with s_u = unit u padded·c and w_u = padded·r when the reduce dtype differs from the compute
//   dtype (else 0): full_shard / hybrid + max_u 2·s_u + s_(u-1) + s_(u+1) + w_(u+1) (s_(u-1) with prefetch;
//               s_(u+1) and w_(u+1) the gradient whose reduce-scatter is in flight), or 2·s_u + s_(u-1) + w_u
//               when that is more; shard_grad_op the same with s_0 + ... + s_u in place of s_u + s_(u-1);
//               zero1 + max_u of w_u and, without a separate copy, shard·c (one wire copy at a time in backward;
//               the source buffer the all-gathers after the optimizer step send the shards from, its largest);
//               no_shard + Σ w_u (every all-reduce in flight)
//   optimizer: state per fp32 element (optimizer_state_bytes_per_element) × this rank's non-padding shard
//              elements (the optimizer sees each parameter's piece of the shard, never padding).
//   host (offload; of the above, what stays in host buffers between steps): Σ shard·(m + 4) (the master shards and
//              their fp32 gradients) + optimizer. A bf16 master's fp32 scratch is host memory too while it lives.
#include <algorithm>
#include <stdexcept>

#include "lab/dtype.hpp"
#include "lab/unit_layout.hpp"
#include "strategies/sharded_plan.hpp"

namespace dtlab {
namespace {

struct UnitShape {
  std::string name;
  int64_t numel = 0, padded = 0, shard = 0;
  int chunk = 0;  // the pipeline chunk of `rank` it belongs to (0 without stages)
};

// The engine's units on `rank` per parallel.wrap (cut at its pipeline chunks' edges, lab/unit_layout.hpp), from the
// parameter shapes (embedding, 9 tensors per block, then the final norm and the head).
std::vector<UnitShape> units_of(const Config& config, int rank, int64_t F) {
  const auto shapes = param_shapes(config.model, config.parallel.tp);  // every unit's, in this rank's tp slices
  const int64_t L = config.model.n_layers;
  constexpr int64_t kPerBlock = 9;
  std::vector<std::vector<int64_t>> model_unit_numel;  // per model unit: 0 embedding, 1..L blocks, L+1 head
  std::vector<std::string> model_unit_name;
  model_unit_numel.push_back({shapes[0].numel});
  model_unit_name.push_back("embedding");
  for (int64_t l = 0; l < L; ++l) {
    model_unit_numel.emplace_back();
    for (int64_t k = 0; k < kPerBlock; ++k)
      model_unit_numel.back().push_back(shapes[static_cast<size_t>(1 + l * kPerBlock + k)].numel);
    model_unit_name.push_back("block." + std::to_string(l));
  }
  model_unit_numel.emplace_back();
  for (size_t i = static_cast<size_t>(1 + L * kPerBlock); i < shapes.size(); ++i)
    model_unit_numel.back().push_back(shapes[i].numel);
  model_unit_name.push_back("head");

  std::vector<UnitShape> units;
  const std::vector<std::vector<int>> chunks = chunks_on_rank(config, rank);
  for (const auto& group : held_unit_groups(config.parallel.wrap, static_cast<int>(L), chunks)) {
    UnitShape u;
    u.chunk = chunk_holding(chunks, group.front());
    for (int m : group) {
      u.name += (u.name.empty() ? "" : "+") + model_unit_name[static_cast<size_t>(m)];
      for (int64_t n : model_unit_numel[static_cast<size_t>(m)]) u.numel += n;
    }
    u.padded = (u.numel + F - 1) / F * F;
    u.shard = u.padded / F;
    units.push_back(std::move(u));
  }
  return units;
}

struct TypeOnWire {
  std::string name;  // as comm records it: float32 | bfloat16 | float16
  int64_t bytes;
};

TypeOnWire type_on_wire(const std::string& config_name, std::string_view key) {
  const Dtype d = dtype_named(config_name, key);
  return {std::string(torch_name(d)), bytes_of(d)};
}

}  // namespace

int64_t sharded_dp_shard_size_of(ShardingMode mode, const Config& config, int64_t data_parallel) {
  // The data-parallel ranks of one node: the node's ranks over the model-parallel ones placed inside it (cp, and tp
  // unless parallel.tp_placement=inter_node puts its groups across the nodes).
  const int64_t inside = config.parallel.cp * (config.parallel.tp_placement == "inter_node" ? 1 : config.parallel.tp);
  const int64_t per_node = config.ranks_per_node / std::max<int64_t>(1, inside);
  return shard_group_size(mode, data_parallel, config.parallel.shard_size, per_node);
}

void check_sharded(ShardingMode mode, std::string_view id, const Config& config) {
  if (config.parallel.collectives == "hierarchical") {
    // No_shard's all-reduce and hybrid's groups have no two-level form here; running them flat would mislabel a study.
    if (traits(mode).shard_group != ShardGroup::world)
      throw std::invalid_argument(
          "parallel.strategy=" + std::string(id) +
          " with parallel.collectives=hierarchical: only the strategies whose shard group is the world (ddp, zero1, "
          "fsdp_full_shard, fsdp_shard_grad_op) have two-level collectives; hybrid's shard groups are the nodes "
          "already; use flat or auto");
    // Both levels run the lab's ring on their own thread; Gloo's reduce-scatter would share the backend's sequence
    // with the all-gathers' thread.
    if (config.parallel.reduce_scatter == "backend")
      throw std::invalid_argument("parallel.strategy=" + std::string(id) +
                                  " with parallel.collectives=hierarchical and parallel.reduce_scatter=backend: the "
                                  "hierarchical reduce-scatter runs the lab's ring at both levels; use "
                                  "parallel.reduce_scatter=ring");
  }
  if (config.precision.master_dtype != "fp32" && config.precision.param_dtype == "fp32")
    throw std::invalid_argument("precision.master_dtype=" + config.precision.master_dtype +
                                " with precision.param_dtype=fp32: the master copy cannot be narrower than the "
                                "parameters it updates; use param_dtype=bf16");
  if (config.model.tie_embeddings && config.parallel.wrap != "model")
    throw std::invalid_argument("parallel.strategy=" + std::string(id) +
                                " with model.tie_embeddings=true: the tied weight "
                                "would span the embedding and head units; use parallel.wrap=model or untied "
                                "embeddings");
}

namespace {

// What one rank of a sharded mode works with, derived once from the config: the groups, the units and the types.
struct ShardedSetting {
  ShardingTraits t;
  DataParallelGroup dp;    // the ranks the strategy runs over: the world, or what tensor parallelism leaves
  int64_t F = 1;           // shard group size
  int64_t R = 1;           // replicas of each shard (hybrid); 1 otherwise
  int64_t shard_rank = 0;  // this rank's chunk of each unit: its place in its shard group, or (two levels) l*M + m
  int64_t K = 1, M = 1;    // two levels: ranks per node and nodes; 1 and F otherwise
  bool two_level = false;  // the shard group's collectives in two levels (parallel.collectives=hierarchical)
  int64_t A = 1;           // micro-steps per step
  std::vector<UnitShape> units;
  TypeOnWire compute, reduce, master;
  bool separate_copy = false;  // an fp32 (or offloaded) master copy apart from the compute parameters
};

ShardedSetting sharded_setting(ShardingMode mode, const Config& config, int rank) {
  ShardedSetting s;
  s.t = traits(mode);
  s.dp = data_parallel_group(config);
  s.F = sharded_dp_shard_size_of(mode, config, s.dp.size);
  s.R = s.dp.size / s.F;
  // This rank's place among the data-parallel ranks (consecutive shard groups of F of them; lab/mesh.hpp).
  const int64_t dp_index = rank / s.dp.stride % s.dp.size;
  s.shard_rank = s.t.shard_group == ShardGroup::none ? 0 : dp_index % s.F;
  s.two_level =
      s.dp.size == config.world_size &&  // the two levels are the world's nodes
      uses_hierarchical_shard_collectives(mode, config.parallel.collectives, config.world_size, config.ranks_per_node);
  if (s.two_level) {
    s.K = config.ranks_per_node;
    s.M = config.world_size / s.K;
    s.shard_rank = (rank % s.K) * s.M + rank / s.K;
  }
  s.A = std::max<int64_t>(1, config.train.accumulation);
  s.units = units_of(config, rank, s.F);
  s.compute = type_on_wire(config.precision.param_dtype, "precision.param_dtype");
  s.reduce = type_on_wire(config.precision.reduce_dtype, "precision.reduce_dtype");
  s.master = type_on_wire(config.precision.master_dtype, "precision.master_dtype");
  s.separate_copy = config.parallel.offload || s.compute.name != s.master.name;
  return s;
}

// The collectives of one step, unit by unit, in the order the engine issues them.
void add_sharded_collectives(const ShardedSetting& s, const Config& config, CostPlan& plan) {
  const ShardingTraits& t = s.t;
  const int n = static_cast<int>(s.units.size());
  const int f = static_cast<int>(s.F), stride = s.dp.stride;
  const int64_t c = s.compute.bytes, r = s.reduce.bytes;
  const std::string rs_algorithm = config.parallel.reduce_scatter == "backend" ? "backend" : "ring";
  const std::string rs_note = rs_algorithm == "backend"
                                  ? "; Gloo's backend reduce-scatter is an all-reduce plus a chunk copy: it moves "
                                    "all-reduce volume 2(p-1)/p·S per rank, not (p-1)/p·S"
                                  : "; lab ring over send/recv: (p-1)/p·S per rank";
  // Two levels (lab/comm/hierarchical.hpp): a gather crosses the nodes first (1/K of the unit, among the M ranks of
  // one local rank: stride K), then the node; a reduce-scatter the node first, then the nodes. Both the lab's order.
  const int k = static_cast<int>(s.K), m = static_cast<int>(s.M);
  auto all_gather = [&](int index, const UnitShape& u, const char* phase, int64_t count, const std::string& what) {
    const std::string label = "unit " + u.name + " parameters (" + what + ")";
    if (!s.two_level) {
      plan.collectives.push_back(
          {"all_gather", "backend", s.compute.name, u.padded * c, f, phase, count, label, stride});
      return;
    }
    plan.collectives.push_back({"all_gather", "backend", s.compute.name, u.padded / k * c, m, phase, count,
                                label + " across nodes", k, -1, index});
    plan.collectives.push_back({"all_gather", "backend", s.compute.name, u.padded * c, k, phase, count,
                                label + " inside the node", 1, -1, index});
  };
  auto reduce_scatter = [&](int index, const UnitShape& u, int64_t count, const std::string& when) {
    const std::string label = "unit " + u.name + " gradients (" + when + ")";
    if (!s.two_level) {
      plan.collectives.push_back(
          {"reduce_scatter", rs_algorithm, s.reduce.name, u.padded * r, f, "backward", count, label + rs_note, stride});
      return;
    }
    plan.collectives.push_back({"reduce_scatter", "ring", s.reduce.name, u.padded * r, k, "backward", count,
                                label + " inside the node", 1, -1, index});
    plan.collectives.push_back({"reduce_scatter", "ring", s.reduce.name, u.padded / k * r, m, "backward", count,
                                label + " across nodes", k, -1, index});
  };
  auto one_double = [&](int group, const std::string& what, int group_stride) {
    plan.collectives.push_back({"all_reduce", "backend", "float64", 8, group, "after-backward", 1, what, group_stride});
  };
  const bool sharded = s.F > 1;  // F = 1: the engine copies instead of gathering / reduce-scattering
  // Under pipeline stages the modes that free parameters gather each unit once per step and keep it through the
  // flush, then reduce-scatter its accumulated gradient once (ShardedSchedule::begin_pipeline_step,
  // reduce_after_flush); or, re-gathering per micro-batch, as without stages every micro-step, the last unit
  // gathered again for its backward too (every unit is freed after its forward: other micro-batches come between).
  // Those calls carry their chunk: the pipeline's step model puts each in the chunk's F, B or W. Their
  // reduce-scatters (in B's hooks, or after W under zero bubble) are phase after-backward, as after a flush: the
  // memory model's one-micro-batch moments (a ring's scratch beside a block's backward) do not describe a stage,
  // whose peak is the micro-batches its schedule keeps in flight (analysis/cost/pipeline_model.hpp).
  const PipelineGathers gathers = pipeline_gathers(config.parallel);
  const bool once_per_step = gathers == PipelineGathers::once_per_step && !t.params_persist();
  const bool per_micro_batch =
      gathers == PipelineGathers::per_micro_batch || gathers == PipelineGathers::per_micro_batch_after_w;
  for (int u = 0; u < n && once_per_step && sharded; ++u) {
    const UnitShape& unit = s.units[static_cast<size_t>(u)];
    all_gather(u, unit, "forward", 1, "gathered once per step, kept through the pipeline's flush");
    reduce_scatter(u, unit, 1, "once per step, after the pipeline's flush");
  }
  for (int u = 0; u < n && !once_per_step; ++u) {
    const UnitShape& unit = s.units[static_cast<size_t>(u)];
    const size_t unit_first_call = plan.collectives.size();
    const std::string every = per_micro_batch ? "every micro-batch" : "every micro-step";
    if (sharded && t.regathers_in_backward()) {
      all_gather(u, unit, "forward", s.A, "forward gather, " + every);
      if (u + 1 < n || per_micro_batch) all_gather(u, unit, "backward", s.A, "backward re-gather, " + every);
    }
    if (sharded && t.keeps_all_units_gathered())
      all_gather(u, unit, "forward", s.A, "forward gather kept through backward, every micro-step");
    switch (t.grads) {
      case GradReduction::reduce_scatter_every_micro_step:
        if (sharded) reduce_scatter(u, unit, s.A, every);
        break;
      case GradReduction::all_reduce_last_micro_step:
        plan.collectives.push_back({"all_reduce", "backend", s.reduce.name, unit.padded * r, s.dp.size, "backward", 1,
                                    "unit " + unit.name + " gradients (last micro-step)", stride});
        break;
      case GradReduction::reduce_scatter_last_micro_step:
        if (sharded) reduce_scatter(u, unit, 1, "last micro-step");
        break;
    }
    for (size_t i = unit_first_call; i < plan.collectives.size() && per_micro_batch; ++i) {
      PlannedCollective& call = plan.collectives[i];
      call.chunk = unit.chunk;
      if (call.op == "reduce_scatter") call.phase = "after-backward";
    }
  }
  const int replicas = static_cast<int>(s.R);
  if (t.replica_all_reduce && replicas > 1)
    for (const auto& unit : s.units)
      plan.collectives.push_back({"all_reduce", "backend", s.reduce.name, unit.shard * r, replicas, "after-backward", 1,
                                  "unit " + unit.name + " gradient shard across replicas", f * stride});
  if (config.precision.loss_scale == "dynamic") {
    // Over the shard group; with none (F = 1, every rank a replica), over the data-parallel group.
    one_double(t.shard_group == ShardGroup::none ? s.dp.size : f, "loss scaling: found inf/nan", stride);
    if (t.replica_all_reduce && replicas > 1)
      one_double(replicas, "loss scaling: found inf/nan across replicas", f * stride);
  }
  if (!t.grads_replicated()) one_double(f, "grad-norm sum of squares", stride);
  if (t.gathers_after_optimizer)
    for (int u = 0; u < n; ++u)
      all_gather(u, s.units[static_cast<size_t>(u)], "optimizer", 1, "updated shards, after the optimizer step");
}

// The state one rank keeps, term by term as ShardedEngine::state_bytes().
void add_sharded_state(const ShardedSetting& s, const Config& config, CostPlan& plan) {
  const ShardingTraits& t = s.t;
  const int64_t c = s.compute.bytes, r = s.reduce.bytes, m = s.master.bytes;
  int64_t non_padding = 0, step_scratch = 0;
  std::vector<UnitBuffers> transient;
  const bool grad_shard_is_full_grad = t.all_reduces_grads() && !s.separate_copy && s.reduce.name == "float32";
  for (const auto& unit : s.units) {
    transient.push_back({.gathered = unit.padded * c,
                         .wire = s.reduce.name != s.compute.name ? unit.padded * r : 0,
                         .gather_source = t.gathers_after_optimizer && !s.separate_copy ? unit.shard * c : 0,
                         .chunk = unit.chunk});
    if (!t.params_persist()) {
      plan.state.params += unit.shard * m;
      plan.state.grads += unit.shard * 4;
      plan.state.buffers += unit.shard * r;
    } else {
      plan.state.params += unit.padded * c;
      plan.state.grads += unit.padded * c;
      if (s.separate_copy) plan.state.params += unit.shard * m;
      if (!grad_shard_is_full_grad) plan.state.buffers += unit.shard * 4;
      if (t.reduce_scatters_grads()) plan.state.buffers += unit.shard * r;
    }
    if (s.separate_copy) plan.state.buffers += unit.shard * c;
    if (s.master.name != "float32") step_scratch += unit.shard * 4;
    const int64_t begin = s.shard_rank * unit.shard;
    non_padding += std::max<int64_t>(0, std::min(begin + unit.shard, unit.numel) - begin);
  }
  // A bf16 master's fp32 scratch exists only through the optimizer step, when no unit is gathered or reduced.
  plan.state.buffers += std::max(
      unit_buffers_peak_bytes(t, transient, config.parallel.prefetch, pipeline_gathers(config.parallel)), step_scratch);
  plan.state.optimizer = non_padding * optimizer_state_bytes_per_element(config.train, 4);
  if (config.parallel.offload) {  // the master shards, their fp32 gradients and the optimizer state: host buffers
    for (const auto& unit : s.units) plan.state.host += unit.shard * (m + 4);
    plan.state.host += plan.state.optimizer;
  }
}

}  // namespace

CostPlan sharded_cost_plan(ShardingMode mode, std::string_view id, const Config& config, int rank) {
  if (rank < 0 || rank >= config.world_size)
    throw std::invalid_argument(std::string(id) + " cost plan: rank " + std::to_string(rank) +
                                " is outside world_size=" + std::to_string(config.world_size));
  const ShardedSetting setting = sharded_setting(mode, config, rank);
  CostPlan plan;
  plan.strategy = std::string(id);
  add_sharded_collectives(setting, config, plan);
  add_sharded_state(setting, config, plan);
  return plan;
}

}  // namespace dtlab
