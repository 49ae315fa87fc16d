// tensor_parallel_cost.cpp: tensor and sequence parallelism's collectives per step (see tensor_parallel_cost.hpp;
// each count below follows one call site of lab/train/tensor_parallel.cpp).
#include "strategies/tensor_parallel_cost.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "lab/dtype.hpp"

namespace dtlab {
namespace {

// What one rank runs of the model: its blocks (global indices), and whether it holds the embedding (the first
// pipeline stage) and the head with the loss (the last); every unit when parallel.pp = 1.
struct HeldUnits {
  std::vector<int64_t> blocks;
  bool embedding = false, head = false;
};
HeldUnits held_units(const Config& config, int rank) {
  const int L = static_cast<int>(config.model.n_layers);
  HeldUnits held;
  for (int m : units_on_rank(config, rank)) {
    if (m == 0)
      held.embedding = true;
    else if (m == L + 1)
      held.head = true;
    else
      held.blocks.push_back(m - 1);
  }
  return held;
}

// How many of the held blocks' halves run their forward again in backward under the config's activation
// checkpointing (lab/train/checkpoint.cpp run_block): {attention halves, MLP halves}.
struct Recomputed {
  int64_t attention = 0, mlp = 0;
};
Recomputed recomputed_halves(const Config& config, const std::vector<int64_t>& blocks) {
  const std::string& mode = config.parallel.activation_checkpointing;
  const auto count = static_cast<int64_t>(blocks.size());
  if (mode == "selective") return {count, 0};
  if (mode != "full") return {};
  const int64_t every = std::max<int64_t>(1, config.parallel.checkpoint_every);
  const auto checkpointed = std::count_if(blocks.begin(), blocks.end(), [&](int64_t l) { return l % every == 0; });
  return {checkpointed, checkpointed};  // blocks 0, every, 2·every, ...
}

}  // namespace

void add_tensor_parallel_collectives(CostPlan& plan, const Config& config, int rank) {
  const int t = static_cast<int>(config.parallel.tp);
  if (t <= 1) return;
  const ModelConfig& m = config.model;
  const HeldUnits held = held_units(config, rank);
  const int64_t first = held.embedding ? 1 : 0, last = held.head ? 1 : 0;
  // Zero bubble's W computes only the linears' weight gradients from what B filed (lab/weight_grad_store.hpp): every
  // tp collective of the backward runs once, in B, under every schedule.
  const int64_t micro_steps = std::max<int64_t>(1, config.train.accumulation);
  const int64_t tokens = config.train.micro_batch * m.seq_len;
  const Dtype activation = dtype_named(config.precision.param_dtype, "precision.param_dtype");
  const std::string act(torch_name(activation));
  const int64_t a_bytes = tokens * m.d_model * bytes_of(activation);
  const Recomputed again = recomputed_halves(config, held.blocks);
  const int64_t halves = 2 * static_cast<int64_t>(held.blocks.size()), recomputed = again.attention + again.mlp;
  // One entry per kind of call: {op, algorithm, dtype, bytes, group, phase, count per step, what}, over the tp ranks
  // of each group (consecutive, or spanning nodes with parallel.tp_placement=inter_node: tensor_parallel_stride).
  const auto add = [&](const char* op, const char* algorithm, const std::string& dtype, int64_t bytes,
                       const char* phase, int64_t per_micro_step, const std::string& what) {
    if (per_micro_step == 0) return;
    PlannedCollective c{op, algorithm, dtype, bytes, t, phase, per_micro_step * micro_steps, what};
    c.mesh_dim = "tp";
    c.stride = tensor_parallel_stride(config);
    plan.collectives.push_back(c);
  };
  if (!config.parallel.sequence_parallel) {
    add("all_reduce", "backend", act, a_bytes, "forward", first + halves,
        "embedding and block halves' outputs (leave)");
    add("all_reduce", "backend", act, a_bytes, "backward", last + halves, "head and block halves' input grads (enter)");
    add("all_reduce", "backend", act, a_bytes, "backward", recomputed, "recomputed block halves' outputs (leave)");
  } else {
    add("reduce_scatter", "ring", act, a_bytes, "forward", first + halves,
        "embedding and block halves' outputs (leave)");
    add("all_gather", "backend", act, a_bytes, "forward", halves + last, "block halves' and head's inputs (enter)");
    add("reduce_scatter", "ring", act, a_bytes, "backward", halves + last, "block halves' and head's input grads");
    add("all_gather", "backend", act, a_bytes, "backward", first + halves, "embedding and block halves' output grads");
    add("all_reduce", "backend", "float32", m.d_model * 4, "backward", halves + last, "norm weights' grads");
    add("all_gather", "backend", act, a_bytes, "backward", recomputed, "recomputed block halves' inputs (enter)");
    add("reduce_scatter", "ring", act, a_bytes, "backward", recomputed, "recomputed block halves' outputs (leave)");
  }
  // Vocabulary-parallel cross-entropy (on the stage that holds the head), in fp32 whatever the compute dtype.
  add("all_gather", "backend", "float32", t * tokens * 4, "forward", last, "loss: each rank's row maxima");
  add("all_reduce", "backend", "float32", tokens * 4, "forward", 2 * last,
      "loss: sum of exponentials, targets' logits");
  PlannedCollective norm{"all_reduce", "backend", "float64", 8, t, "after-backward", 1, "gradient norm's sum"};
  norm.mesh_dim = "tp";
  norm.stride = tensor_parallel_stride(config);
  plan.collectives.push_back(norm);
  if (config.precision.loss_scale == "dynamic") {  // the tp ranks' slices overflow apart: they vote together
    PlannedCollective vote{
        "all_reduce", "backend", "float64", 8, t, "after-backward", 1, "loss scaling: found inf/nan"};
    vote.mesh_dim = "tp";
    vote.stride = tensor_parallel_stride(config);
    plan.collectives.push_back(vote);
  }
}

}  // namespace dtlab
