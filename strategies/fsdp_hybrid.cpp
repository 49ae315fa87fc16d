// fsdp_hybrid.cpp: the `fsdp_hybrid` strategy.
//
// HYBRID_SHARD: shard inside groups of parallel.shard_size consecutive ranks (FULL_SHARD within the
// group), replicate across groups: after backward, gradient shards are all-reduced across the replica
// group of ranks holding the same shard. Trades memory for inter-group traffic (3(F-1)/F of the params
// inside groups + 2(R-1)/R of a shard across).
// The machinery (flat units, gathers, reduce-scatters, sharded optimizer, offload, checkpointing) is
// shared with the other sharded strategies in strategies/sharded/ (engine.hpp); this file fixes the schedule.
#include "strategies/sharded/engine.hpp"

namespace dtlab {

std::unique_ptr<Strategy> make_fsdp_hybrid_strategy() {
  return make_sharded_strategy(ShardingMode::hybrid, "fsdp_hybrid");
}

}  // namespace dtlab
