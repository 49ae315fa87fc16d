// step_model.cpp: replays one optimizer step of each strategy on a compute timeline and one collective
// stream to find the exposed communication (see step_model.hpp for the schedules).
#include "analysis/cost/step_model.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "analysis/cost/comm_model.hpp"
#include "analysis/cost/compute_model.hpp"
#include "lab/unit_layout.hpp"
#include "strategies/catalog.hpp"
#include "strategies/schedule_kit.hpp"

namespace dtlab::analysis {
namespace {

// Forward and backward ms of one micro-step per flat unit, splitting the compute model's totals by FLOPs.
struct UnitTimes {
  std::vector<double> forward, backward;
};

UnitTimes unit_times(const Config& config, const ComputeTime& compute, const std::vector<std::vector<int>>& units) {
  const UnitFlops flops = unit_flops_per_token(config);
  double forward_total = 0, recompute_total = 0;
  for (size_t m = 0; m < flops.forward.size(); ++m) {
    forward_total += flops.forward[m];
    recompute_total += flops.recompute[m];
  }
  const double recompute_ms = compute.backward_ms - 2 * compute.forward_ms;
  UnitTimes t;
  for (const auto& unit : units) {
    double f = 0, r = 0;
    for (int m : unit) {
      f += flops.forward[static_cast<size_t>(m)];
      r += flops.recompute[static_cast<size_t>(m)];
    }
    const double forward_ms = forward_total > 0 ? compute.forward_ms * f / forward_total : 0;
    t.forward.push_back(forward_ms);
    t.backward.push_back(2 * forward_ms + (recompute_total > 0 ? recompute_ms * r / recompute_total : 0));
  }
  return t;
}

}  // namespace

int64_t optimizer_bytes_per_element(const TrainConfig& train) {
  if (train.optimizer == "adamw") return 80;
  if (train.optimizer == "sgd") return train.momentum != 0.0 ? 40 : 20;
  throw std::invalid_argument("train.optimizer='" + train.optimizer + "' has no step-time model");
}

double elementwise_bytes(const Config& config, const CostPlan& plan) {
  const int64_t state_per_element = optimizer_state_bytes_per_element(config.train, 4);
  const double updated = state_per_element > 0 ? static_cast<double>(plan.state.optimizer) / state_per_element
                                               : static_cast<double>(plan.state.grads) / 4.0;
  double bytes = updated * static_cast<double>(optimizer_bytes_per_element(config.train));
  // Gradient norm (pow + sum), clipping scale, averaging divide, zeroing: 12 + 8 + 8 + 4 bytes per fp32 grad.
  bytes += static_cast<double>(plan.state.grads) / 4.0 * (12 + (config.train.grad_clip > 0 ? 8 : 0) + 8 + 4);
  if (config.precision.master_dtype != "fp32") bytes += updated * 12;  // fp32 scratch copy and round back
  if (config.precision.param_dtype != config.precision.master_dtype) bytes += updated * 6;  // master -> compute cast
  return bytes;
}

bool spans_nodes(const PlannedCollective& c, const MachineProfile& profile) {
  return group_spans_nodes(c.group_size, c.stride, profile.comm.ranks_per_node);
}

int link_sharing(const PlannedCollective& c, const MachineProfile& profile) {
  if (!spans_nodes(c, profile)) return 1;
  return std::max(1, std::min({std::max(1, c.stride), profile.comm.ranks_per_node, profile.comm.ranks_per_link}));
}

double planned_collective_us(const PlannedCollective& c, const Config& /*config*/, const MachineProfile& profile,
                             bool* inter_node) {
  const bool use_inter = spans_nodes(c, profile) && profile.comm.inter_node.has_value();
  if (inter_node) *inter_node = use_inter;
  if (!use_inter) return collective_time_us(profile.comm.intra_node, c.op, c.algorithm, c.bytes, c.group_size);
  return collective_time_us(*profile.comm.inter_node, c.op, c.algorithm, c.bytes, c.group_size,
                            link_sharing(c, profile));
}

double hierarchical_all_reduce_us(const MachineProfile& profile, int64_t bytes, int nodes, int k, int64_t piece_bytes) {
  const int64_t pieces = std::max<int64_t>(1, (bytes + piece_bytes - 1) / piece_bytes);
  const int64_t piece = (bytes + pieces - 1) / pieces;
  const auto call_us = [&](const char* op, const char* algorithm, int64_t b, int size, int stride) {
    return planned_collective_us({op, algorithm, "float32", b, size, "backward", 1, "hierarchical", stride}, Config{},
                                 profile);
  };
  const double rs = k > 1 ? call_us("reduce_scatter", "ring", piece, k, 1) : 0.0;
  const double ag = k > 1 ? call_us("all_gather", "ring", piece, k, 1) : 0.0;
  const double ar = call_us("all_reduce", "backend", piece / std::max(1, k), nodes, k);
  const double n = static_cast<double>(pieces);
  return std::max(n * (rs + ag), rs + n * ar + ag);
}

void add_to_row(OpRows& rows, const PlannedCollective& c, double ms, const std::string& level) {
  OpTime& row = rows[{c.op, c.algorithm, c.dtype, c.group_size, c.mesh_dim, level}];
  row.op = c.op, row.algorithm = c.algorithm, row.dtype = c.dtype, row.group_size = c.group_size;
  row.mesh_dim = c.mesh_dim, row.level = level;
  row.count += c.count;
  row.bytes_per_step += c.bytes * c.count;
  row.time_ms += ms * static_cast<double>(c.count);
}

std::vector<OpTime> row_list(const OpRows& rows) {
  std::vector<OpTime> out;
  for (const auto& [key, row] : rows) out.push_back(row);
  return out;
}

StepPrediction predict_step(const Config& config, const CostPlan& plan, const MachineProfile& profile) {
  StepPrediction s;
  const ComputeTime compute = compute_time(config, profile);
  s.notes = compute.notes;
  s.compute_ms = compute.step_ms;

  // Per-call times and rows of by_op; the calls every strategy runs synchronously after backward are summed here,
  // and so are a model-parallel dimension's (tensor parallelism's all-reduces, gathers and reduce-scatters block
  // the compute that needs their result: exposed in full); the data-parallel strategy's own calls go to its
  // schedule (its StrategySpec::exposed_comm_ms), which sees only them.
  const StrategySpec& spec = strategy_spec(plan.strategy);
  CostPlan data_parallel_plan = plan;
  data_parallel_plan.collectives.clear();
  std::vector<double> data_parallel_call_ms;
  double model_parallel_ms = 0;
  OpRows rows;
  double after_backward_ms = 0;      // synchronous after backward: replica all-reduces and the 8-byte all-reduces
  double scheduled_ms = 0;           // the calls the strategy's schedule places (it may overlap them with compute)
  double unhideable_ms = 0;          // Σ (1 - overlap_hidden of the call's level) × time over those calls
  double unhideable_in_node_ms = 0;  // the same over the calls inside a node
  bool any_inter = false, spans_without_model = false;
  for (const PlannedCollective& c : plan.collectives) {
    if (c.phase == "setup") {  // not a step's call; the schedule sees it, untimed, in plan order
      if (c.mesh_dim == "dp") {
        data_parallel_plan.collectives.push_back(c);
        data_parallel_call_ms.push_back(0.0);
      }
      continue;
    }
    bool inter = false;
    const double ms = planned_collective_us(c, config, profile, &inter) / 1e3;
    any_inter = any_inter || inter;
    if (spans_nodes(c, profile) && !profile.comm.inter_node) spans_without_model = true;
    add_to_row(rows, c, ms, spans_nodes(c, profile) ? "inter_node" : "intra_node");
    s.comm_ms += ms * static_cast<double>(c.count);
    if (c.mesh_dim != "dp") {
      model_parallel_ms += ms * static_cast<double>(c.count);
      continue;
    }
    data_parallel_plan.collectives.push_back(c);
    data_parallel_call_ms.push_back(ms);
    if (runs_after_backward(c)) {
      after_backward_ms += ms * static_cast<double>(c.count);
    } else {
      const CommModel& level = inter ? *profile.comm.inter_node : profile.comm.intra_node;
      scheduled_ms += ms * static_cast<double>(c.count);
      const double unhideable = (1.0 - level.overlap_hidden.value_or(1.0)) * ms * static_cast<double>(c.count);
      unhideable_ms += unhideable;
      if (!inter) unhideable_in_node_ms += unhideable;
    }
  }
  s.by_op = row_list(rows);
  if (any_inter) s.notes.push_back("groups spanning nodes use the profile's inter_node model");
  if (spans_without_model)
    s.notes.push_back(
        "some groups span more than comm.ranks_per_node ranks but the profile has no inter_node "
        "model: the intra_node one was used");

  // The trainer's loss all-reduce (8 bytes over the data-parallel group), every step when it has more than one rank.
  const DataParallelGroup data_parallel = data_parallel_group(config);
  if (data_parallel.size > 1) {
    const PlannedCollective loss{"all_reduce",        "backend",        "float64", 8,
                                 data_parallel.size,  "after-backward", 1,         "trainer loss",
                                 data_parallel.stride};
    const double ms = planned_collective_us(loss, config, profile) / 1e3;
    after_backward_ms += ms;
    s.comm_ms += ms;
  }

  const UnitTimes ut =
      unit_times(config, compute, wrap_unit_groups(config.parallel.wrap, static_cast<int>(config.model.n_layers)));
  const ScheduleInput schedule{.config = config,
                               .plan = data_parallel_plan,
                               .call_ms = data_parallel_call_ms,
                               .unit_forward_ms = ut.forward,
                               .unit_backward_ms = ut.backward,
                               .forward_ms = compute.forward_ms,
                               .backward_ms = compute.backward_ms};
  double exposed = 0;
  if (spec.exposed_comm_ms != nullptr) {
    exposed = spec.exposed_comm_ms(schedule);
  } else {
    s.notes.push_back("no schedule for strategy " + plan.strategy + ": all of its communication counted as exposed");
    exposed = s.comm_ms - after_backward_ms - model_parallel_ms;
  }
  // What the schedule overlapped is hidden only as far as the profile's overlap_hidden says (comm_model.hpp): the
  // rest costs the step its time, on the collective stream or as compute slowed by a backend thread on its cores.
  // A negative overlap_hidden charges more than the overlapped time: running both at once was measured slower than
  // taking turns.
  const double overlapped_ms = std::max(0.0, scheduled_ms - exposed);
  if (overlapped_ms > 0 && unhideable_ms > 0) {
    s.overlap_lost_ms = overlapped_ms * unhideable_ms / scheduled_ms;
    s.overlap_lost_in_node_ms = overlapped_ms * unhideable_in_node_ms / scheduled_ms;
    const double hidden = 1.0 - unhideable_ms / scheduled_ms;
    char note[240];
    if (hidden >= 0)
      std::snprintf(note, sizeof note,
                    "%.1f of the %.1f ms the schedule overlaps count as exposed: the profile's overlap_hidden says "
                    "compute hides only %.0f%% of a collective here",
                    s.overlap_lost_ms, overlapped_ms, 100.0 * hidden);
    else
      std::snprintf(note, sizeof note,
                    "the %.1f ms the schedule overlaps cost %.1f ms: the profile's overlap_hidden (%.2f) says a "
                    "collective running beside compute here costs %.0f%% more than the two taking turns",
                    overlapped_ms, s.overlap_lost_ms, hidden, -100.0 * hidden);
    s.notes.emplace_back(note);
  }
  s.exposed_comm_ms = exposed + s.overlap_lost_ms + after_backward_ms + model_parallel_ms;
  if (model_parallel_ms > 0) {
    char note[160];
    std::snprintf(note, sizeof note,
                  "%.1f ms of tensor-parallel collectives per step, exposed in full (each blocks the layer after it)",
                  model_parallel_ms);
    s.notes.emplace_back(note);
  }

  // Optimizer and the elementwise passes over parameters and gradients (memory-bound).
  s.optimizer_ms = elementwise_bytes(config, plan) / (profile.compute.memory_GBps * 1e9) * 1e3;

  // Offload: each gather first copies the master shard to the compute side; each reduce-scatter's output goes
  // back to the host shard (synchronous on the rank's thread).
  if (config.parallel.offload) {
    double copy_bytes = 0;
    for (const auto& c : plan.collectives) {
      if (c.phase == "setup") continue;
      if (c.unit >= 0 && c.stride == 1)
        continue;  // a hierarchical call's level inside the node: the shard crosses once
      const double shard = static_cast<double>(c.bytes) / std::max(1, c.group_size);
      if (c.op == "all_gather" || c.op == "reduce_scatter") copy_bytes += shard * static_cast<double>(c.count);
    }
    const CallsByRole calls = calls_by_role(schedule);
    if (calls.gather_forward.empty() && calls.reduce_scatter.empty())  // F = 1: the whole flat parameters, once a step
      copy_bytes += static_cast<double>(plan.state.grads);
    const double gbps = profile.host_device_GBps.value_or(profile.compute.memory_GBps);
    if (!profile.host_device_GBps)
      s.notes.push_back("profile has no host_device_GBps: offload copies timed at compute.memory_GBps");
    s.offload_ms = copy_bytes / (gbps * 1e9) * 1e3;
  }

  s.step_ms = s.compute_ms + s.exposed_comm_ms + s.optimizer_ms + s.offload_ms;
  s.tokens_per_s = static_cast<double>(config.train.global_batch * config.model.seq_len) / (s.step_ms / 1e3);
  return s;
}

}  // namespace dtlab::analysis
