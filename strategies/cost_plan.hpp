// cost_plan.hpp: what one optimizer step of a strategy communicates and holds, per rank (torch-free).
//
// Each strategy has `<id>_cost.cpp` beside its implementation, producing a CostPlan from the model
// shape, the world layout and the policy. analysis/ turns plans into predicted times with calibrated
// α/β/γ and FLOP rates; tests check the implementation's real bytes against the plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/config.hpp"

namespace dtlab {

struct PlannedCollective {
  std::string op;         // all_reduce | all_gather | reduce_scatter | broadcast
  std::string algorithm;  // backend | ring
  std::string dtype;      // float32 | bfloat16 | ...
  int64_t bytes = 0;      // nccl-tests convention (see lab/comm/comm.hpp)
  int group_size = 1;
  std::string phase;  // setup | backward | after-backward | optimizer | forward
  int64_t count = 1;  // how many such calls per step
  std::string what;   // e.g. "bucket 0 (1 MiB cap)"
};

struct PlannedState {  // bytes per rank, padding included
  int64_t params = 0, grads = 0, optimizer = 0, buffers = 0;
};

struct CostPlan {
  std::string strategy;
  std::vector<PlannedCollective> collectives;  // one optimizer step (setup excluded unless phase=setup)
  PlannedState state;
  // Sum of bytes of the step's collectives (phase != setup), times count.
  int64_t step_bytes() const;
};

// Parameter tensors of the model in model order (names and element counts), from the shape alone.
struct ParamShape {
  std::string name;
  int64_t numel;
  bool is_norm_or_embedding;
};
std::vector<ParamShape> param_shapes(const ModelConfig& model);

// Optimizer state bytes per parameter element: adamw 2 moments, sgd 1 buffer (0 without momentum).
int64_t optimizer_state_bytes_per_element(const TrainConfig& train, int64_t element_bytes);

CostPlan single_cost_plan(const Config& config);
CostPlan ddp_cost_plan(const Config& config);
// By parallel.strategy; throws std::invalid_argument for strategies without a plan.
CostPlan cost_plan(const Config& config);

// The sharded strategies (strategies/sharded_cost.cpp, mirroring fsdp_engine.cpp). Per-rank state
// depends on the rank: the padding of each unit sits in the last shards, and optimizer state covers only
// the non-padding elements of this rank's shard. REQUIRES 0 <= rank < config.world_size.
CostPlan fsdp_full_shard_cost_plan(const Config& config, int rank = 0);
CostPlan fsdp_shard_grad_op_cost_plan(const Config& config, int rank = 0);
CostPlan fsdp_no_shard_cost_plan(const Config& config, int rank = 0);
CostPlan fsdp_hybrid_cost_plan(const Config& config, int rank = 0);
CostPlan zero1_cost_plan(const Config& config, int rank = 0);
// By parallel.strategy for one rank (cost_plan(config) is rank 0; single and ddp ignore the rank).
CostPlan cost_plan(const Config& config, int rank);

}  // namespace dtlab
