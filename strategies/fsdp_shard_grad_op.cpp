// fsdp_shard_grad_op.cpp: the `fsdp_shard_grad_op` strategy.
//
// SHARD_GRAD_OP (ZeRO-2): as full_shard, but a unit's gathered parameters stay from its forward through
// its backward (no second gather). Gradients and optimizer state stay sharded. Peak: every unit's
// parameters at once; communication 2(p-1)/p of the parameter bytes (DDP's).
// The machinery (flat units, gathers, reduce-scatters, sharded optimizer, offload, checkpointing) is
// shared with the other sharded strategies in strategies/sharded/ (engine.hpp); this file fixes the schedule.
#include "strategies/sharded/engine.hpp"

namespace dtlab {

std::unique_ptr<Strategy> make_fsdp_shard_grad_op_strategy() {
  return make_sharded_strategy(ShardingMode::shard_grad_op, "fsdp_shard_grad_op");
}

}  // namespace dtlab
