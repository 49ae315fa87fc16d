// predict.cpp: assembles memory, communication and step-time predictions into result.json's "prediction"
// object (see predict.hpp for the keys).
#include "analysis/cost/predict.hpp"

#include "analysis/cost/checkpoint_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>

#include "analysis/cost/compute_model.hpp"
#include "analysis/cost/memory_model.hpp"
#include "analysis/cost/pipeline_model.hpp"
#include "analysis/cost/step_model.hpp"
#include "lab/node_layout.hpp"
#include "lab/pipeline_schedule.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {
namespace {

std::string label_of(const Config& config, const MachineProfile* profile, std::vector<std::string>& notes) {
  if (!config.model.trainable) {
    notes.push_back("model.preset=" + config.model.preset + " is prediction-only here: projection");
    return "projection";
  }
  if (profile == nullptr) return "prediction";
  if (profile->kind == "spec-sheet") {
    notes.push_back("profile " + profile->name + " is a spec sheet, not a measurement of this machine: projection");
    return "projection";
  }
  if (profile->comm.measured_world_size > 0 && config.world_size > profile->comm.measured_world_size) {
    notes.push_back("world_size " + std::to_string(config.world_size) + " exceeds the " +
                    std::to_string(profile->comm.measured_world_size) +
                    " ranks the profile's communication was measured with: projection");
    return "projection";
  }
  return "prediction";
}

MemoryPrediction memory_of(const dtlab::Config& config, const CostPlan& plan, const std::string& backend, int rank) {
  return config.parallel.pp > 1 ? pipeline_stage_memory(config, plan, backend, rank)
                                : predict_memory(config, plan, backend);
}

// Memory per rank by category of the same job at 1, 2, 4, ... 1024 ranks with the same per-rank batch (micro-batch
// and accumulation kept, the global batch grown with the world); sizes the strategy cannot run at (e.g. HYBRID's
// shard group larger than the world) are left out.
nlohmann::json memory_by_world(const dtlab::Config& config, const std::string& backend) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t world = 1; world <= 1024; world *= 2) {
    dtlab::Config c = config;
    c.world_size = world;
    if (config.train.global_batch * world % config.world_size != 0) continue;
    c.train.global_batch = config.train.global_batch * world / config.world_size;
    if (config.ranks_per_node > 0) c.ranks_per_node = std::min<int64_t>(config.ranks_per_node, world);
    try {
      dtlab::validate(c);
    } catch (const dtlab::ConfigError&) {
      continue;
    }
    const MemoryPrediction m = memory_of(c, cost_plan(c, 0), backend, 0);
    out.push_back({{"world_size", world},
                   {"params", m.params},
                   {"grads", m.grads},
                   {"optimizer", m.optimizer},
                   {"buffers", m.buffers},
                   {"activations", m.activations},
                   {"logits", m.logits},
                   {"peak", m.peak}});
  }
  return out;
}

}  // namespace

const std::vector<std::string>& prediction_keys() {
  static const std::vector<std::string> keys = {
      "label",           "profile", "profile_kind",         "world_size",   "rank",       "strategy", "memory_bytes",
      "memory_by_world", "comm",    "compute_ms",           "optimizer_ms", "offload_ms", "step_ms",  "tokens_per_s",
      "flops_per_token", "notes",   "peak_timing_dependent"};
  return keys;
}

nlohmann::json predict(const dtlab::Config& config, const MachineProfile* profile, int rank) {
  if (rank < 0 || rank >= config.world_size)
    throw std::invalid_argument("predict: rank " + std::to_string(rank) +
                                " is outside world_size=" + std::to_string(config.world_size));
  const CostPlan plan = cost_plan(config, rank);
  std::vector<std::string> notes;
  nlohmann::json j;
  j["label"] = label_of(config, profile, notes);
  j["profile"] = profile ? nlohmann::json(profile->name) : nlohmann::json(nullptr);
  j["profile_kind"] = profile ? nlohmann::json(profile->kind) : nlohmann::json(nullptr);
  j["world_size"] = config.world_size;
  j["rank"] = rank;
  j["strategy"] = plan.strategy;
  j["peak_timing_dependent"] = strategy_spec(plan.strategy).peak_depends_on_thread_timing;

  // The backend that gathers: the profile's (its comm model was measured on it), else the config's (auto = Gloo
  // on this lab's CPU ranks).
  const std::string backend = profile                             ? profile->comm.intra_node.backend
                              : config.parallel.backend == "nccl" ? std::string("nccl")
                                                                  : std::string("gloo");
  const MemoryPrediction memory = memory_of(config, plan, backend, rank);
  notes.insert(notes.end(), memory.notes.begin(), memory.notes.end());
  j["memory_bytes"] = {{"params", memory.params},
                       {"grads", memory.grads},
                       {"optimizer", memory.optimizer},
                       {"buffers", memory.buffers},
                       {"activations", memory.activations},
                       {"logits", memory.logits},
                       {"peak", memory.peak},
                       {"host", memory.host},
                       {"device_peak", memory.device_peak}};
  j["memory_by_world"] = memory_by_world(config, backend);

  const nlohmann::json null = nullptr;
  auto op_row_json = [](const OpTime& row, nlohmann::json time_ms) {
    return nlohmann::json{{"op", row.op},
                          {"algorithm", row.algorithm},
                          {"dtype", row.dtype},
                          {"group_size", row.group_size},
                          {"mesh_dim", row.mesh_dim},
                          {"level", row.level},
                          {"count", row.count},
                          {"bytes_per_step", row.bytes_per_step},
                          {"time_ms", std::move(time_ms)}};
  };
  nlohmann::json by_op = nlohmann::json::array();
  if (profile) {
    notes.insert(notes.end(), profile->adjustments.begin(), profile->adjustments.end());
    const StepPrediction step = config.parallel.pp > 1 ? predict_pipeline_step(config, plan, *profile, rank)
                                                       : predict_step(config, plan, *profile);
    notes.insert(notes.end(), step.notes.begin(), step.notes.end());
    for (const auto& row : step.by_op) by_op.push_back(op_row_json(row, row.time_ms));
    j["comm"] = {{"bytes_per_step", plan.step_bytes()},
                 {"time_ms", step.comm_ms},
                 {"exposed_ms", step.exposed_comm_ms},
                 {"overlap_lost_ms", step.overlap_lost_ms},
                 {"overlap_lost_in_node_ms", step.overlap_lost_in_node_ms},
                 {"by_op", by_op}};
    j["compute_ms"] = step.compute_ms;
    j["optimizer_ms"] = step.optimizer_ms;
    j["offload_ms"] = step.offload_ms;
    j["step_ms"] = step.step_ms;
    j["tokens_per_s"] = step.tokens_per_s;
  } else {
    // Without a profile: bytes per op, no times.
    OpRows rows;
    for (const auto& c : plan.collectives)
      if (c.phase != "setup") add_to_row(rows, c, 0.0, c.level);
    for (const OpTime& row : row_list(rows)) by_op.push_back(op_row_json(row, null));
    j["comm"] = {
        {"bytes_per_step", plan.step_bytes()}, {"time_ms", null}, {"exposed_ms", null}, {"overlap_lost_ms", null},
        {"overlap_lost_in_node_ms", null},     {"by_op", by_op}};
    for (const char* key : {"compute_ms", "optimizer_ms", "offload_ms", "step_ms", "tokens_per_s"}) j[key] = null;
    if (!profile)
      notes.push_back(
          "no machine profile: memory and bytes only (pass --profile, e.g. analysis/profiles/h100_sxm.json)");
  }
  if (!config.checkpoint.dir.empty()) {  // checkpoints are saved: what each save writes, and how long it takes
    const CheckpointPrediction c =
        predict_checkpoint(config, profile ? profile->disk_write_GBps : std::optional<double>{});
    j["checkpoint"] = {{"bytes_this_rank", c.bytes_per_rank.at(static_cast<size_t>(rank))},
                       {"bytes_per_rank", c.bytes_per_rank},
                       {"total_bytes", c.total_bytes},
                       {"writers", c.writers},
                       {"write_ms", c.write_ms ? nlohmann::json(*c.write_ms) : nlohmann::json(nullptr)}};
    notes.insert(notes.end(), c.notes.begin(), c.notes.end());
    if (profile && !profile->disk_write_GBps)
      notes.push_back("profile has no disk_write_GBps (calibrate again): checkpoint write time not predicted");
  }
  const ComputeFlops flops = compute_flops(config);
  j["flops_per_token"] = flops.model_per_token;
  if (flops.recompute_per_token > 0)
    notes.push_back("activation checkpointing executes " + std::to_string(flops.executed_per_token) +
                    " FLOPs per token (model FLOPs + recomputed forward); flops_per_token counts model FLOPs only");
  j["notes"] = notes;
  return j;
}

std::optional<CollectivesChoice> choose_collectives(const dtlab::Config& config, const MachineProfile& profile) {
  // Only a strategy that reads parallel.collectives (its catalogue entry's keys) has the choice.
  const auto& keys = strategy_spec(config.parallel.strategy).keys;
  const bool reads_collectives = std::find(keys.begin(), keys.end(), "parallel.collectives") != keys.end();
  if (!reads_collectives || config.parallel.collectives != "auto" || config.parallel.pp > 1 ||
      !job_spans_nodes(config.world_size, config.ranks_per_node))
    return std::nullopt;
  // A strategy that refuses the hierarchical form of this config (a sharded one with Gloo's reduce-scatter) keeps
  // flat; its check says why when asked for explicitly. (A config refused either way is the run's error, not ours.)
  const auto refused = [&](const char* collectives) {
    dtlab::Config c = config;
    c.parallel.collectives = collectives;
    try {
      if (strategy_spec(c.parallel.strategy).check) strategy_spec(c.parallel.strategy).check(c);
    } catch (const std::invalid_argument&) {
      return true;
    }
    return false;
  };
  if (refused("hierarchical") && !refused("flat")) return std::nullopt;
  const auto step_ms = [&](const char* collectives) {
    dtlab::Config c = config;
    c.parallel.collectives = collectives;
    return predict_step(c, cost_plan(c, 0), profile).step_ms;
  };
  CollectivesChoice choice;
  choice.flat_step_ms = step_ms("flat");
  choice.hierarchical_step_ms = step_ms("hierarchical");
  choice.collectives = choice.hierarchical_step_ms < choice.flat_step_ms ? "hierarchical" : "flat";
  return choice;
}

std::function<nlohmann::json(const dtlab::Config&, int)> run_prediction(const dtlab::Config& config,
                                                                        const Topology& topology) {
  std::shared_ptr<const MachineProfile> profile;
  if (!config.instrument.profile.empty())
    profile = std::make_shared<const MachineProfile>(on_topology(load_profile(config.instrument.profile), topology));
  return [profile](const dtlab::Config& run_config, int rank) { return predict(run_config, profile.get(), rank); };
}

}  // namespace dtlab::analysis
