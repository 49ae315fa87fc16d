// fsdp_no_shard.cpp: the `fsdp_no_shard` strategy.
//
// NO_SHARD: every rank keeps every unit whole (shard group of one); after the last micro-step's
// backward each unit's gradients are all-reduced over all ranks. DDP's math in FSDP's unit structure —
// the baseline that isolates what sharding costs.
// The machinery (flat units, gathers, reduce-scatters, sharded optimizer, offload, checkpointing) is
// shared with the other sharded strategies in strategies/sharded/ (engine.hpp); this file fixes the schedule.
#include "strategies/sharded/engine.hpp"

namespace dtlab {

std::unique_ptr<Strategy> make_fsdp_no_shard_strategy() {
  return make_sharded_strategy(ShardingMode::no_shard, "fsdp_no_shard");
}

}  // namespace dtlab
