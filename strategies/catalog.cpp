// catalog.cpp: the table of strategy specs, expanded from catalog.def (plus DTLAB_CATALOG_EXTRA when a test
// catalogue defines it), and the lookups the rest of the lab uses instead of matching ids.
#include "strategies/catalog.hpp"

#include <algorithm>
#include <stdexcept>

#include "strategies/pipeline_cost.hpp"
#include "strategies/tensor_parallel_cost.hpp"

namespace dtlab {

#define DTLAB_STRATEGY(id) extern const StrategySpec id##_spec;
#include "strategies/catalog.def"
#ifdef DTLAB_CATALOG_EXTRA
#include DTLAB_CATALOG_EXTRA
#endif
#undef DTLAB_STRATEGY

const std::vector<const StrategySpec*>& strategy_specs() {
  static const std::vector<const StrategySpec*> table = {
#define DTLAB_STRATEGY(id) &id##_spec,
#include "strategies/catalog.def"
#ifdef DTLAB_CATALOG_EXTRA
#include DTLAB_CATALOG_EXTRA
#endif
#undef DTLAB_STRATEGY
  };
  return table;
}

std::vector<std::string> strategy_ids() {
  std::vector<std::string> ids;
  for (const StrategySpec* spec : strategy_specs()) ids.emplace_back(spec->id);
  return ids;
}

const StrategySpec* find_strategy_spec(std::string_view id) {
  for (const StrategySpec* spec : strategy_specs())
    if (spec->id == id) return spec;
  return nullptr;
}

const StrategySpec& strategy_spec(std::string_view id) {
  if (const StrategySpec* spec = find_strategy_spec(id)) return *spec;
  std::string known;
  for (const StrategySpec* spec : strategy_specs()) known += (known.empty() ? "" : " | ") + std::string(spec->id);
  throw std::invalid_argument("parallel.strategy='" + std::string(id) +
                              "' is not available in this build (available: " + known + ")");
}

StrategyChoices strategy_choices() {
  StrategyChoices choices{.ids = strategy_ids(), .under_pipeline = {}, .reshard_under_pipeline = {}};
  for (const StrategySpec* spec : strategy_specs()) {
    if (spec->runs_under_pipeline) choices.under_pipeline.emplace_back(spec->id);
    const auto& keys = spec->keys;
    if (std::find(keys.begin(), keys.end(), "parallel.pp_reshard_after_forward") != keys.end())
      choices.reshard_under_pipeline.emplace_back(spec->id);
  }
  return choices;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides, int64_t world_size) {
  return load_config(path, overrides, world_size, strategy_choices());
}

Config load_config_text(const std::string& yaml_text, const std::vector<std::string>& overrides, int64_t world_size,
                        const std::string& origin) {
  return load_config_text(yaml_text, overrides, world_size, strategy_choices(), origin);
}

void validate(const Config& config) { validate(config, strategy_choices()); }

Config from_json(const nlohmann::json& j, int64_t world_size) { return from_json(j, world_size, strategy_choices()); }

ParallelDims parallel_dims(const Config& config) {
  const ParallelConfig& p = config.parallel;
  const int64_t dp = data_parallel_size(config);
  const StrategySpec* spec = find_strategy_spec(p.strategy);
  const int64_t shard = spec != nullptr && spec->dp_shard_size != nullptr ? spec->dp_shard_size(config, dp) : 1;
  return ParallelDims{.pp = p.pp,
                      .dp_replicate = shard >= 1 && dp % shard == 0 ? dp / shard : 0,
                      .dp_shard = shard,
                      .cp = p.cp,
                      .tp = p.tp,
                      .ep = p.ep,
                      .tp_outside_data_parallel = p.tp_placement == "inter_node"};
}

DeviceMesh device_mesh(const Config& config) { return DeviceMesh(parallel_dims(config), config.world_size); }

CostPlan cost_plan(const Config& config, int rank) {
  const StrategySpec& spec = strategy_spec(config.parallel.strategy);
  if (spec.plan == nullptr)
    throw std::invalid_argument("parallel.strategy=" + config.parallel.strategy + " has no cost plan in this build");
  CostPlan plan = spec.plan(config, rank);              // the data-parallel strategy's calls over its group
  add_tensor_parallel_collectives(plan, config, rank);  // and each model-parallel dimension's over its own
  add_pipeline_collectives(plan, config, rank);
  for (PlannedCollective& c : plan.collectives)  // on one node (ranks_per_node 0 or the world) no group spans nodes
    c.level = group_spans_nodes(c.group_size, c.stride, config.ranks_per_node) ? "inter_node" : "intra_node";
  return plan;
}

}  // namespace dtlab
