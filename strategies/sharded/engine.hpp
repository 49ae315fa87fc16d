// engine.hpp: the runtime shared by the sharded strategies (fsdp_full_shard, fsdp_shard_grad_op, fsdp_no_shard,
// fsdp_hybrid, zero1). Each strategy file picks a ShardingMode and documents its schedule; the mode's traits
// (sharding.hpp, shared with the cost plan strategies/sharded_plan.cpp) say what it does, and ShardedEngine
// (engine.cpp) wires the pieces:
//   flat_unit.{hpp,cpp}  flat units (parallel.wrap), their storage, views of it bound into the model
//   groups.{hpp,cpp}     the shard group and the replica group
//   schedule.{hpp,cpp}   gathers, frees, reduce-scatters and all-reduces, from forward and backward hooks
//   optimizer.{hpp,cpp}  the sharded optimizer step: bf16 masters with fp32 scratch, stochastic rounding, offload
// Modifiers: parallel.offload (master shards, gradient shards and optimizer state in separate host buffers; the
// optimizer steps there; parameters are copied to the compute buffer for each gather),
// parallel.activation_checkpointing (lab/train/checkpoint.hpp; recomputation sees gathered params).
// Gradient accumulation: FSDP modes reduce-scatter every micro-step and accumulate the shard.
#pragma once

#include <memory>
#include <string>

#include "lab/train/strategy.hpp"
#include "strategies/sharded/sharding.hpp"  // ShardingMode, shared with the cost plan

namespace dtlab {

std::unique_ptr<Strategy> make_sharded_strategy(ShardingMode mode, const std::string& id);

}  // namespace dtlab
