// cost_plan.hpp: what one optimizer step of a strategy communicates and holds, per rank (torch-free).
//
// Each strategy has `<id>_cost.cpp` beside its implementation; its StrategySpec (strategies/spec.hpp) produces a
// CostPlan from the model shape, the world layout and the policy. analysis/ turns plans into predicted times with
// calibrated α/β/γ and FLOP rates; tests check the implementation's real bytes against the plan.
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
  // Ranks between consecutive members of the group: 1 for groups of consecutive ranks (the world, a node, a shard
  // group), F for hybrid's replica groups and K for the cross-node level of a hierarchical all-reduce. Whether a
  // group spans nodes, and how many groups share a node's link, follow from it (analysis/cost/step_model.hpp).
  int stride = 1;
  // DDP's gradient bucket this call serves (-1: not a bucket's call): the schedule groups a hierarchical
  // all-reduce's three calls per piece by it.
  int bucket = -1;
  // The sharded unit whose gather or reduce-scatter this call is one level of (-1: a call of its own): a hierarchical
  // reduce-scatter or all-gather is two calls in a row (lab/comm/hierarchical.hpp), and the schedule runs them as one.
  int unit = -1;
  // The mesh dimension whose group runs the call (lab/mesh.hpp names): "dp" for the data-parallel strategies' calls
  // (over dp_replicate x dp_shard, or one of them for hybrid's two levels), "tp" for tensor parallelism's, "pp" for
  // the stages' sends and sums.
  std::string mesh_dim = "dp";
  // Under pipeline stages re-gathering per micro-batch (parallel.pp_reshard_after_forward): the chunk of this rank
  // (0 .. pp_virtual_stages - 1, in model order) whose F, B or W runs this call, once per micro-batch; the pipeline's
  // step model puts it there. -1: a call of the step as a whole.
  int chunk = -1;
  // The network level the group crosses on the config's nodes: "inter_node" when its ranks span nodes
  // (group_spans_nodes on config.ranks_per_node), else "intra_node". cost_plan() sets it for every call.
  std::string level = "intra_node";
};

// Whether a group of `group_size` ranks `stride` apart spans nodes of `ranks_per_node` ranks (0: one node).
inline bool group_spans_nodes(int group_size, int stride, int64_t ranks_per_node) {
  return ranks_per_node > 0 && static_cast<int64_t>(group_size - 1) * (stride > 1 ? stride : 1) >= ranks_per_node;
}

struct PlannedState {  // bytes per rank, padding included
  int64_t params = 0, grads = 0, optimizer = 0, buffers = 0;
  int64_t host = 0;  // of the above, kept in host buffers between steps (parallel.offload; StateBytes::host)
};

struct CostPlan {
  std::string strategy;
  std::vector<PlannedCollective> collectives;  // one optimizer step (setup excluded unless phase=setup)
  PlannedState state;
  // Sum of bytes of the step's collectives (phase != setup), times count.
  int64_t step_bytes() const;
};

// Parameter tensors of the model in model order (names and element counts on one rank), from the shape and the
// layout alone: with tensor parallelism of degree `tp` each split tensor holds 1/tp of its rows or columns
// (lab/train/tensor_parallel_plan.hpp says which), the norms stay whole. The one description of the model's
// parameters every cost model reads.
struct ParamShape {
  std::string name;
  int64_t numel;  // on one rank
  bool is_norm_or_embedding;
  std::string split_by = {};  // the mesh dimension that splits it ("tp"), empty when every rank holds it whole
};
std::vector<ParamShape> param_shapes(const ModelConfig& model, int64_t tp = 1);
// The layout's shapes for a config on `rank`: its parallel.tp slices, and under parallel.pp > 1 only the parameters
// of the pipeline stage(s) that rank runs (lab/pipeline_split.hpp; pp is the mesh's outermost dimension).
std::vector<ParamShape> param_shapes(const Config& config, int rank = 0);
// The model units (0 = embedding, 1..L = blocks, L + 1 = head) `rank` runs: every unit without pipeline stages.
std::vector<int> units_on_rank(const Config& config, int rank);
// The same, per chunk (virtual stage) of that rank, in model order: one chunk of every unit without pipeline stages.
std::vector<std::vector<int>> chunks_on_rank(const Config& config, int rank);

// The data-parallel group of the config's mesh (lab/mesh.hpp: pp, dp_replicate, dp_shard, cp, tp, outermost first)
// as the plans see it: its size, world / (pp * cp * tp) (the rule of lab/config.hpp data_parallel_size; the plans do
// not link the config rules), and the ranks between its neighbours (cp * tp; cp with parallel.tp_placement=
// inter_node). Throws std::invalid_argument when the model-parallel degrees do not divide the world.
struct DataParallelGroup {
  int size = 1, stride = 1;
};
DataParallelGroup data_parallel_group(const Config& config);
// The ranks between neighbours of a tensor-parallel group: 1 (consecutive, inside a node), or with
// parallel.tp_placement=inter_node the data-parallel ranks times cp (each group spans nodes).
int tensor_parallel_stride(const Config& config);

// Optimizer state bytes per parameter element: adamw 2 moments, sgd 1 buffer (0 without momentum).
int64_t optimizer_state_bytes_per_element(const TrainConfig& train, int64_t element_bytes);

// The plan of config.parallel.strategy on `rank`, from the catalogue (strategies/catalog.hpp; each strategy's
// StrategySpec::plan in its <id>_cost.cpp). Throws std::invalid_argument for an id this build lacks, or a rank
// outside [0, config.world_size) where the plan depends on it.
CostPlan cost_plan(const Config& config, int rank = 0);

}  // namespace dtlab
