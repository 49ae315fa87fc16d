// tensor_parallel_cost.cpp: tensor and sequence parallelism's collectives per step (see tensor_parallel_cost.hpp;
// each count below follows one call site of lab/train/tensor_parallel.cpp).
#include "strategies/tensor_parallel_cost.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "lab/dtype.hpp"

namespace dtlab {
namespace {

// How many times each block half's forward runs again in backward under the config's activation checkpointing
// (lab/train/checkpoint.cpp run_block): {attention halves, MLP halves} over all blocks.
struct Recomputed {
  int64_t attention = 0, mlp = 0;
};
Recomputed recomputed_halves(const Config& config) {
  const int64_t layers = config.model.n_layers;
  const std::string& mode = config.parallel.activation_checkpointing;
  if (mode == "selective") return {layers, 0};
  if (mode != "full") return {};
  const int64_t every = std::max<int64_t>(1, config.parallel.checkpoint_every);
  const int64_t blocks = (layers + every - 1) / every;  // blocks 0, every, 2·every, ...
  return {blocks, blocks};
}

}  // namespace

void add_tensor_parallel_collectives(CostPlan& plan, const Config& config) {
  const int t = static_cast<int>(config.parallel.tp);
  if (t <= 1) return;
  const ModelConfig& m = config.model;
  const int64_t micro_steps = std::max<int64_t>(1, config.train.accumulation);
  const int64_t tokens = config.train.micro_batch * m.seq_len;
  const Dtype activation = dtype_named(config.precision.param_dtype, "precision.param_dtype");
  const std::string act(torch_name(activation));
  const int64_t a_bytes = tokens * m.d_model * bytes_of(activation);
  const Recomputed again = recomputed_halves(config);
  const int64_t layers = m.n_layers, halves = 2 * layers, recomputed = again.attention + again.mlp;
  // One entry per kind of call: {op, algorithm, dtype, bytes, group, phase, count per step, what}, over tp ranks
  // 0..t-1 of each group (consecutive: stride 1).
  const auto add = [&](const char* op, const char* algorithm, const std::string& dtype, int64_t bytes,
                       const char* phase, int64_t per_micro_step, const std::string& what) {
    if (per_micro_step == 0) return;
    PlannedCollective c{op, algorithm, dtype, bytes, t, phase, per_micro_step * micro_steps, what};
    c.mesh_dim = "tp";
    plan.collectives.push_back(c);
  };
  if (!config.parallel.sequence_parallel) {
    add("all_reduce", "backend", act, a_bytes, "forward", 1 + halves, "embedding and block halves' outputs (leave)");
    add("all_reduce", "backend", act, a_bytes, "backward", 1 + halves, "head and block halves' input grads (enter)");
    add("all_reduce", "backend", act, a_bytes, "backward", recomputed, "recomputed block halves' outputs (leave)");
  } else {
    add("reduce_scatter", "ring", act, a_bytes, "forward", 1 + halves, "embedding and block halves' outputs (leave)");
    add("all_gather", "backend", act, a_bytes, "forward", halves + 1, "block halves' and head's inputs (enter)");
    add("reduce_scatter", "ring", act, a_bytes, "backward", halves + 1, "block halves' and head's input grads");
    add("all_gather", "backend", act, a_bytes, "backward", 1 + halves, "embedding and block halves' output grads");
    add("all_reduce", "backend", "float32", m.d_model * 4, "backward", halves + 1, "norm weights' grads");
    add("all_gather", "backend", act, a_bytes, "backward", recomputed, "recomputed block halves' inputs (enter)");
    add("reduce_scatter", "ring", act, a_bytes, "backward", recomputed, "recomputed block halves' outputs (leave)");
  }
  // Vocabulary-parallel cross-entropy, in fp32 whatever the compute dtype.
  add("all_gather", "backend", "float32", t * tokens * 4, "forward", 1, "loss: each rank's row maxima");
  add("all_reduce", "backend", "float32", tokens * 4, "forward", 2, "loss: sum of exponentials, targets' logits");
  PlannedCollective norm{"all_reduce", "backend", "float64", 8, t, "after-backward", 1, "gradient norm's sum"};
  norm.mesh_dim = "tp";
  plan.collectives.push_back(norm);
  if (config.precision.loss_scale == "dynamic") {  // the tp ranks' slices overflow apart: they vote together
    PlannedCollective vote{
        "all_reduce", "backend", "float64", 8, t, "after-backward", 1, "loss scaling: found inf/nan"};
    vote.mesh_dim = "tp";
    plan.collectives.push_back(vote);
  }
}

}  // namespace dtlab
