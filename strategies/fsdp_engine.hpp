// fsdp_engine.hpp: the machinery shared by the sharded strategies (fsdp_full_shard, fsdp_shard_grad_op,
// fsdp_no_shard, fsdp_hybrid, zero1). Each strategy file picks a ShardingMode and documents its
// schedule; this engine implements flat units, sharding, gathers, reduce-scatters and the sharded
// optimizer.
//
// Units (parallel.wrap): the embedding, the transformer blocks (one per unit, or every 2 / 4, or the
// whole model in one unit), the final norm with the head. A unit's parameters are flattened into one
// buffer, padded to a multiple of the shard group size F and split into F equal shards; rank i of the
// shard group owns shard i: the fp32 master parameters, their gradient, and their optimizer state.
//
// The model computes with views of each unit's gathered flat buffer (`full`). Gathers write that
// buffer through an alias with its own version counter, so refilling it after a free does not look
// like an in-place change to autograd; freeing drops its storage (views stay valid and are refilled
// before they are read again).
//
//            forward                      backward                             after the step
// full_shard gather, free after unit     re-gather (hook on the unit's output),  -
//                                        reduce-scatter, free
// shard_grad_op gather, keep             reduce-scatter, free after the unit     -
// no_shard   (F = 1) nothing             all-reduce gradients (last micro-step)  -
// hybrid     as full_shard inside        + all-reduce of gradient shards across  -
//            groups of shard_size        replica groups (after the last micro)
// zero1      full params always          gradients accumulate unsharded; after   all-gather params
//                                        backward reduce-scatter (last micro)
// With parallel.prefetch the next unit's gather (forward order in forward, reverse in backward) is
// started before the current unit computes.
// Gradient accumulation: FSDP modes reduce-scatter every micro-step and accumulate the shard.
// Modifiers: parallel.offload (master shards, gradient shards and optimizer state in separate host
// buffers; the optimizer steps there; parameters are copied to the compute buffer for each gather),
// parallel.activation_checkpointing (lab/train/checkpoint.hpp; recomputation sees gathered params).
#pragma once

#include <memory>
#include <string>

#include "lab/train/strategy.hpp"
#include "strategies/sharded_plan.hpp"  // ShardingMode, shared with the cost plan

namespace dtlab {

std::unique_ptr<Strategy> make_sharded_strategy(ShardingMode mode, const std::string& id);

}  // namespace dtlab
