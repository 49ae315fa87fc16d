// spec.hpp: what a strategy tells the rest of the lab about itself, torch-free (one StrategySpec per strategy,
// defined in its <id>_cost.cpp beside its runtime file <id>.cpp, listed once in strategies/catalog.def).
//
// Config validation, the cost plans, the step-time model and the memory model read the catalogue
// (strategies/catalog.hpp) instead of matching strategy ids: adding a strategy is two files and one line.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "lab/config.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab {

// What the step-time model hands a strategy's schedule: one call of each planned collective and the compute of
// one micro-step, per flat unit (parallel.wrap grouping, as the sharded engine builds them) and in total.
struct ScheduleInput {
  const Config& config;
  const CostPlan& plan;
  std::vector<double> call_ms;  // one call of plan.collectives[i] (ms); 0 for setup collectives
  std::vector<double> unit_forward_ms, unit_backward_ms;  // per flat unit, one micro-step
  double forward_ms = 0, backward_ms = 0;                 // one micro-step (backward includes recomputation)
};

struct StrategySpec {
  std::string_view id;   // stable lowercase id: parallel.strategy=<id>, result.json, run names
  std::string_view doc;  // one line: what it shards and communicates ("available:" lists, docs)
  // One line: when to choose it over the others (result.json context.choose_when; the report's strategy summary).
  std::string_view choose_when;
  // The config keys beyond model/train/precision that the strategy reads (tests check each is a real key).
  std::vector<std::string_view> keys;
  // Combinations the strategy cannot honour (e.g. ddp with offload): throws std::invalid_argument naming the keys and
  // the way out. Its runtime calls it first thing in wrap(), so a refusal ends the job like any training error.
  void (*check)(const Config& config) = nullptr;
  // The cost plan of one optimizer step on `rank` (bytes, collectives, state per rank). REQUIRES 0 <= rank <
  // config.world_size; throws std::invalid_argument otherwise.
  CostPlan (*plan)(const Config& config, int rank) = nullptr;
  // Communication the strategy's schedule leaves exposed in one optimizer step (ms), not counting the calls that
  // run synchronously after backward (8-byte all-reduces, phase after-backward), which the step model adds for
  // every strategy. nullptr: no schedule is modelled, every call counts as exposed (and the prediction says so).
  double (*exposed_comm_ms)(const ScheduleInput& in) = nullptr;
  // How the strategy lays out the `data_parallel` ranks (lab/config.hpp data_parallel_size) on the mesh: the size of
  // the dp_shard dimension it shards state over; the rest, data_parallel / dp_shard, replicate (dp_replicate).
  // nullptr: 1, every data-parallel rank a replica (ddp). strategies/catalog.hpp device_mesh() reads it.
  int64_t (*dp_shard_size)(const Config& config, int64_t data_parallel) = nullptr;
  // The strategy hooks every unit's output in backward (sharded units), which keeps one more activation gradient
  // alive at the peak (analysis/cost/memory_model.hpp activation_peak).
  bool hooks_unit_outputs = false;
  // The strategy's comm thread allocates while the main thread computes (the ring reduce-scatter's scratch, gathers
  // issued ahead, offload's copies), so which buffers are live at the memory peak depends on thread timing: measured
  // peaks of identical runs differ by a few percent. The prediction says so (prediction.peak_timing_dependent) and
  // the accuracy gate prints such peaks without judging them (analysis/accuracy.hpp).
  bool peak_depends_on_thread_timing = false;
  // The strategy can sit under pipeline stages (parallel.pp > 1): it hands the pipeline schedule its model
  // (Strategy::pipeline_access) and communicates the gradients of the schedule's backwards in finish_gradients.
  // Config validation refuses parallel.pp > 1 with any other.
  bool runs_under_pipeline = false;
};

}  // namespace dtlab
