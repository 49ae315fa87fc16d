// step_model.cpp: replays one optimizer step of each strategy on a compute timeline and one collective
// stream to find the exposed communication (see step_model.hpp for the schedules).
#include "analysis/cost/step_model.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <tuple>

#include "analysis/cost/comm_model.hpp"
#include "analysis/cost/compute_model.hpp"
#include "strategies/ddp_buckets.hpp"

namespace dtlab::analysis {
namespace {

// The engine's flat units (strategies/fsdp_engine.cpp build_units) as lists of model units: 0 embedding,
// 1..L blocks, L+1 head.
std::vector<std::vector<int>> flat_units(const Config& config) {
  const int L = static_cast<int>(config.model.n_layers);
  std::vector<std::vector<int>> groups;
  const std::string& wrap = config.parallel.wrap;
  if (wrap == "model") {
    groups.emplace_back();
    for (int m = 0; m <= L + 1; ++m) groups.back().push_back(m);
    return groups;
  }
  const int per = wrap == "every_2" ? 2 : wrap == "every_4" ? 4 : 1;
  groups.push_back({0});
  for (int l = 0; l < L; l += per) {
    groups.emplace_back();
    for (int k = l; k < std::min(L, l + per); ++k) groups.back().push_back(k + 1);
  }
  groups.push_back({L + 1});
  return groups;
}

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

// One collective stream: calls run one after another in issue order.
struct Stream {
  double free_at = 0;
  double run(double issued_at, double duration) {
    free_at = std::max(free_at, issued_at) + duration;
    return free_at;
  }
};

bool is_small(const PlannedCollective& c) { return c.bytes <= 8 && c.op == "all_reduce"; }

// Asynchronous collectives issued at `ready` (ms from the start of a backward of `backward_ms`), in order;
// returns how long after the end of backward the last one finishes (0 when all finish in time).
double overlapped_tail(const std::vector<double>& ready, const std::vector<double>& duration, double backward_ms) {
  Stream stream;
  for (size_t i = 0; i < ready.size(); ++i) stream.run(ready[i], duration[i]);
  return std::max(0.0, stream.free_at - backward_ms);
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

double planned_collective_us(const PlannedCollective& c, const Config& config, const MachineProfile& profile,
                             bool* inter_node) {
  const bool replica_group = c.what.find("across replicas") != std::string::npos;
  const int64_t F = config.parallel.shard_size > 0 ? config.parallel.shard_size : config.world_size;
  const int64_t stride = replica_group ? F : 1;
  const bool spans = (static_cast<int64_t>(c.group_size) - 1) * stride >= profile.comm.ranks_per_node;
  const bool use_inter = spans && profile.comm.inter_node.has_value();
  if (inter_node) *inter_node = use_inter;
  const CommModel& model = use_inter ? *profile.comm.inter_node : profile.comm.intra_node;
  return collective_time_us(model, c.op, c.algorithm, c.bytes, c.group_size);
}

StepPrediction predict_step(const Config& config, const CostPlan& plan, const MachineProfile& profile) {
  StepPrediction s;
  const ComputeTime compute = compute_time(config, profile);
  s.notes = compute.notes;
  s.compute_ms = compute.step_ms;
  const int64_t A = std::max<int64_t>(1, config.train.accumulation);
  const std::string& id = plan.strategy;

  // Per-call times, rows of by_op, and the plan's collectives sorted into the schedule's roles.
  std::map<std::tuple<std::string, std::string, std::string, int>, OpTime> rows;
  std::vector<double> gather_fwd, gather_bwd, reduce_scatter, unit_all_reduce, bucket_all_reduce, after_optimizer;
  double after_backward_ms = 0;  // synchronous after backward: replica all-reduces and the 8-byte all-reduces
  bool any_inter = false, spans_without_model = false;
  for (const auto& c : plan.collectives) {
    if (c.phase == "setup") continue;
    bool inter = false;
    const double ms = planned_collective_us(c, config, profile, &inter) / 1e3;
    any_inter = any_inter || inter;
    const int64_t stride = c.what.find("across replicas") != std::string::npos
                               ? (config.parallel.shard_size > 0 ? config.parallel.shard_size : config.world_size)
                               : 1;
    if ((c.group_size - 1) * stride >= profile.comm.ranks_per_node && !profile.comm.inter_node)
      spans_without_model = true;
    OpTime& row = rows[{c.op, c.algorithm, c.dtype, c.group_size}];
    row.op = c.op, row.algorithm = c.algorithm, row.dtype = c.dtype, row.group_size = c.group_size;
    row.count += c.count;
    row.bytes_per_step += c.bytes * c.count;
    row.time_ms += ms * static_cast<double>(c.count);
    s.comm_ms += ms * static_cast<double>(c.count);
    if (is_small(c) || c.phase == "after-backward") {
      after_backward_ms += ms * static_cast<double>(c.count);
    } else if (c.op == "all_gather" && c.phase == "forward") {
      gather_fwd.push_back(ms);
    } else if (c.op == "all_gather" && c.phase == "backward") {
      gather_bwd.push_back(ms);
    } else if (c.op == "all_gather" && c.phase == "optimizer") {
      after_optimizer.push_back(ms);
    } else if (c.op == "reduce_scatter") {
      reduce_scatter.push_back(ms);
    } else if (c.op == "all_reduce" && id == "ddp") {
      bucket_all_reduce.push_back(ms);
    } else if (c.op == "all_reduce") {
      unit_all_reduce.push_back(ms);
    }
  }
  for (auto& [key, row] : rows) s.by_op.push_back(row);
  if (any_inter) s.notes.push_back("groups spanning nodes use the profile's inter_node model");
  if (spans_without_model)
    s.notes.push_back(
        "some groups span more than comm.ranks_per_node ranks but the profile has no inter_node "
        "model: the intra_node one was used");

  // The trainer's loss all-reduce (8 bytes over the world), every step when world > 1.
  if (config.world_size > 1) {
    const PlannedCollective loss{"all_reduce",     "backend", "float64",     8, static_cast<int>(config.world_size),
                                 "after-backward", 1,         "trainer loss"};
    const double ms = planned_collective_us(loss, config, profile) / 1e3;
    after_backward_ms += ms;
    s.comm_ms += ms;
  }

  const auto units = flat_units(config);
  const UnitTimes ut = unit_times(config, compute, units);
  const size_t n = units.size();
  double exposed = 0;
  const bool sharded_gathers = !gather_fwd.empty();
  if (id == "fsdp_full_shard" || id == "fsdp_hybrid" || id == "fsdp_shard_grad_op") {
    if ((sharded_gathers && gather_fwd.size() != n) || (!reduce_scatter.empty() && reduce_scatter.size() != n))
      throw std::logic_error("step model: " + id + " plan has " + std::to_string(gather_fwd.size()) +
                             " forward gathers and " + std::to_string(reduce_scatter.size()) + " reduce-scatters for " +
                             std::to_string(n) + " units");
    const bool regather = id != "fsdp_shard_grad_op";
    const bool prefetch = config.parallel.prefetch;
    double micro_total = 0;
    Stream stream;
    double t = 0;
    std::vector<double> ready(n, -1.0);
    auto issue = [&](size_t u, double at, const std::vector<double>& times) {
      if (ready[u] >= 0 || times.empty() || u >= times.size()) return;
      ready[u] = stream.run(at, times[u]);
    };
    for (size_t u = 0; u < n; ++u) {  // forward
      issue(u, t, gather_fwd);
      if (ready[u] >= 0) t = std::max(t, ready[u]);
      if (prefetch && u + 1 < n) issue(u + 1, t, gather_fwd);
      t += ut.forward[u];
    }
    std::fill(ready.begin(), ready.end(), -1.0);
    if (!regather) std::fill(ready.begin(), ready.end(), 0.0);  // shard_grad_op keeps every unit gathered
    if (n > 0) ready[n - 1] = 0.0;                              // the last unit stays gathered into backward
    std::vector<double> bwd(n, 0.0);  // backward re-gathers by unit (the plan lists units 0 .. n-2)
    for (size_t u = 0; u < gather_bwd.size() && u < n; ++u) bwd[u] = gather_bwd[u];
    for (size_t k = n; k-- > 0;) {  // backward, last unit first
      if (ready[k] < 0) ready[k] = stream.run(t, bwd[k]);
      t = std::max(t, ready[k]);
      if (prefetch && k > 0 && ready[k - 1] < 0) ready[k - 1] = stream.run(t, bwd[k - 1]);
      t += ut.backward[k];
      if (!reduce_scatter.empty()) {
        t = std::max(t, stream.free_at);  // pending gathers finish before the ring's send/recv
        t += reduce_scatter[k];
        stream.free_at = t;
      }
    }
    micro_total = t;
    exposed = static_cast<double>(A) * (micro_total - compute.forward_ms - compute.backward_ms);
  } else if (id == "ddp" || id == "fsdp_no_shard") {
    // Issue times of the asynchronous all-reduces within the last micro-step's backward.
    std::vector<double> issue_at, durations;
    if (id == "ddp") {
      const auto shapes = param_shapes(config.model);
      std::vector<int64_t> grad_bytes;
      double total = 0;
      std::vector<double> weight;  // backward work attributed to each parameter: its elements; the embedding 0
      for (size_t i = 0; i < shapes.size(); ++i) {
        grad_bytes.push_back(shapes[i].numel * 4);
        weight.push_back(i == 0 ? 0.0 : static_cast<double>(shapes[i].numel));
        total += weight.back();
      }
      const auto cap = static_cast<int64_t>(config.parallel.bucket_cap_mb * 1024.0 * 1024.0);
      const BucketLayout layout = assign_buckets(grad_bytes, cap, kFirstBucketCapBytes);
      if (layout.buckets.size() != bucket_all_reduce.size())
        throw std::logic_error("step model: ddp plan has " + std::to_string(bucket_all_reduce.size()) +
                               " bucket all-reduces, the bucket layout " + std::to_string(layout.buckets.size()));
      for (size_t b = 0; b < layout.buckets.size(); ++b) {
        int first = static_cast<int>(shapes.size());  // the bucket is complete when its earliest parameter is
        for (int i : layout.buckets[b]) first = std::min(first, i);
        double done = 0;  // backward work of parameters >= first (reverse order)
        for (size_t i = static_cast<size_t>(first); i < shapes.size(); ++i) done += weight[i];
        issue_at.push_back(total > 0 ? compute.backward_ms * done / total : 0);
        durations.push_back(bucket_all_reduce[b]);
      }
    } else {
      if (unit_all_reduce.size() != n)
        throw std::logic_error("step model: fsdp_no_shard plan has " + std::to_string(unit_all_reduce.size()) +
                               " gradient all-reduces for " + std::to_string(n) + " units");
      double done = 0;
      for (size_t k = n; k-- > 0;) {  // a unit's all-reduce starts when its backward is done
        done += ut.backward[k];
        issue_at.push_back(done);
        durations.push_back(unit_all_reduce[k]);
      }
    }
    exposed = overlapped_tail(issue_at, durations, compute.backward_ms);
  } else if (id == "zero1") {
    for (double ms : reduce_scatter) exposed += ms;  // synchronous in the last micro-step's hooks
    for (double ms : after_optimizer) exposed += ms;
  } else if (id != "single") {
    s.notes.push_back("no schedule for strategy " + id + ": all of its communication counted as exposed");
    exposed = s.comm_ms - after_backward_ms;
  }
  s.exposed_comm_ms = exposed + after_backward_ms;

  // Optimizer and the elementwise passes over parameters and gradients (memory-bound).
  s.optimizer_ms = elementwise_bytes(config, plan) / (profile.compute.memory_GBps * 1e9) * 1e3;

  // Offload: each gather first copies the master shard to the compute side; each reduce-scatter's output goes
  // back to the host shard (synchronous on the rank's thread).
  if (config.parallel.offload) {
    double copy_bytes = 0;
    for (const auto& c : plan.collectives) {
      if (c.phase == "setup") continue;
      const double shard = static_cast<double>(c.bytes) / std::max(1, c.group_size);
      if (c.op == "all_gather" || c.op == "reduce_scatter") copy_bytes += shard * static_cast<double>(c.count);
    }
    if (sharded_gathers == false && reduce_scatter.empty())  // F = 1: the whole flat parameters, once a step
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
