// fsdp_full_shard.cpp: the `fsdp_full_shard` strategy.
//
// FULL_SHARD (ZeRO-3): parameters, gradients and optimizer state sharded over all ranks. Before a
// unit's forward its parameters are all-gathered and freed right after; before its backward they are
// gathered again (prefetching the next unit's); right after its backward the unit's gradients are
// reduce-scattered and the gathered buffers freed. Peak parameter memory: the shards plus one or two
// gathered units. Communication per step: 3(p-1)/p of the parameter bytes (1.5x DDP).
// The machinery (flat units, gathers, reduce-scatters, sharded optimizer, offload, checkpointing) is
// shared with the other sharded strategies in strategies/sharded/ (engine.hpp); this file fixes the schedule.
#include "strategies/sharded/engine.hpp"

namespace dtlab {

std::unique_ptr<Strategy> make_fsdp_full_shard_strategy() {
  return make_sharded_strategy(ShardingMode::full_shard, "fsdp_full_shard");
}

}  // namespace dtlab
