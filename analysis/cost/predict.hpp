// predict.hpp: the prediction of one run — memory by category, communication, step time and throughput — as
// the JSON object every result.json carries under "prediction" and `dtlab predict` prints (torch-free).
//
//   Config c = load_config("scenarios/configs/sharding.yaml", {"parallel.strategy=fsdp_full_shard"}, 2);
//   MachineProfile p = load_profile("analysis/profiles/h100_sxm.json");
//   nlohmann::json prediction = predict(c, &p);       // nullptr: memory and bytes only, times null
//
// Keys (always present; null where not computable, e.g. every time without a profile):
//   label          "prediction" | "projection": projection when the shape is not trainable here, the world
//                  is larger than the profile measured, or the profile is a spec sheet
//   profile, profile_kind, world_size, rank, strategy
//   memory_bytes   {params, grads, optimizer, buffers, activations, logits, peak}   per rank, bytes
//   memory_by_world  [{world_size, params, ..., peak}]: the same job at 1, 2, 4 ... 1024 ranks with the same per-rank
//                  batch (rank 0; the sizes the strategy can run at), for the scaling study's projection
//   comm           {bytes_per_step, time_ms, exposed_ms,
//                   by_op: [{op, algorithm, dtype, group_size, count, bytes_per_step, time_ms}]}
//   compute_ms, optimizer_ms, offload_ms, step_ms, tokens_per_s, flops_per_token
//   checkpoint     only with checkpoint.dir: {bytes_this_rank, bytes_per_rank[], total_bytes, writers, write_ms}
//                  (analysis/cost/checkpoint_model.hpp; write_ms null without the profile's disk_write_GBps)
//   notes          [strings]: assumptions and where the model is known to be weak for this config
// Measured counterparts in result.json: memory.{params,grads,optimizer,buffers,activations}_bytes and
// memory.tensor_peak_bytes (peak), summary.step_ms_median, summary.tokens_per_s.
//
// REQUIRES: 0 <= rank < config.world_size; a strategy with a cost plan (strategies/cost_plan.hpp).
// Throws std::invalid_argument naming the rule otherwise.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/cost/profile.hpp"
#include "analysis/cost/topology.hpp"
#include "lab/config.hpp"

namespace dtlab::analysis {

nlohmann::json predict(const dtlab::Config& config, const MachineProfile* profile, int rank = 0);

// What a training run records under result.json "prediction" (the runtime gets it injected through
// TrainOptions::predict, lab/train/trainer.hpp, and never includes this code). The machine profile named by
// instrument.profile is loaded here, before the run starts, so a bad path fails before any work and alike on every
// rank; the returned function predicts for the rank it is given once the run has finished. `topology`: the nodes and
// link rates the run has (dtlab launch --nodes; analysis/cost/topology.hpp), applied to the profile. A tensor-parallel
// run is predicted from this rank's slices (strategies/cost_plan.hpp param_shapes) and its tp collectives.
std::function<nlohmann::json(const dtlab::Config&, int rank)> run_prediction(const dtlab::Config& config,
                                                                             const Topology& topology = {});

// parallel.collectives=auto decided by the model: for a strategy that reads the key (today DDP) on a job across nodes
// (config.ranks_per_node) with `auto`,
// the step time predicted with the flat and with the hierarchical all-reduce on `profile`, and the faster of the two
// ("flat" on a tie). nullopt when there is nothing to decide (another strategy, another setting, one node).
struct CollectivesChoice {
  std::string collectives;  // flat | hierarchical
  double flat_step_ms = 0, hierarchical_step_ms = 0;
};
std::optional<CollectivesChoice> choose_collectives(const dtlab::Config& config, const MachineProfile& profile);

// The top-level keys of predict()'s object, in the order above (tests and the report check against this).
const std::vector<std::string>& prediction_keys();

}  // namespace dtlab::analysis
