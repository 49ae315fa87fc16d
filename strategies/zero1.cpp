// zero1.cpp: the `zero1` strategy.
//
// ZeRO-1: full parameters and gradients on every rank, optimizer state sharded. Gradients accumulate
// unsharded over micro-steps; after the last backward each unit's gradients are reduce-scattered, every
// rank updates its shard of the parameters, and the parameters are all-gathered. Same bytes as DDP per
// step, optimizer memory divided by the world size.
// The machinery (flat units, gathers, reduce-scatters, sharded optimizer, offload, checkpointing) is
// shared with the other sharded strategies in strategies/sharded/ (engine.hpp); this file fixes the schedule.
#include "strategies/sharded/engine.hpp"

namespace dtlab {

std::unique_ptr<Strategy> make_zero1_strategy() { return make_sharded_strategy(ShardingMode::zero1, "zero1"); }

}  // namespace dtlab
