// sharded_plan.hpp: the cost plan shared by the sharded strategies, by mode (torch-free). The runtime engine
// (strategies/sharded/engine.cpp) takes the same ShardingMode and reads the same traits table
// (strategies/sharded/sharding.hpp), so the plan and the engine name one schedule.
#pragma once

#include <cstdint>
#include <string_view>

#include "lab/config.hpp"
#include "strategies/cost_plan.hpp"
#include "strategies/sharded/sharding.hpp"  // ShardingMode, traits(mode)

namespace dtlab {

// The plan of one optimizer step of `mode` on `rank`, labelled `id` (the calling strategy's). Per-rank state
// depends on the rank: the padding of each unit sits in the last shards, and optimizer state covers only the
// non-padding elements of this rank's shard. Throws std::invalid_argument unless 0 <= rank < config.world_size.
CostPlan sharded_cost_plan(ShardingMode mode, std::string_view id, const Config& config, int rank);

// The refusals every sharded strategy shares (its spec's check): bf16 masters under fp32 parameters, tied
// embeddings split across units, hierarchical collectives where `mode` has no two-level form or with Gloo's backend
// reduce-scatter. Throws std::invalid_argument naming the keys and the way out.
void check_sharded(ShardingMode mode, std::string_view id, const Config& config);

// The sharded strategies' spec.dp_shard_size: `Mode`'s shard group over the data-parallel ranks (the world for
// FULL_SHARD, SHARD_GRAD_OP and ZeRO-1; parallel.shard_size or the node for HYBRID; 1 for NO_SHARD).
// (A node holds ranks_per_node / (cp * tp) data-parallel ranks: the model-parallel dimensions are placed inside it.)
int64_t sharded_dp_shard_size_of(ShardingMode mode, const Config& config, int64_t data_parallel);
template <ShardingMode Mode>
int64_t sharded_dp_shard_size(const Config& config, int64_t data_parallel) {
  return sharded_dp_shard_size_of(Mode, config, data_parallel);
}

}  // namespace dtlab
