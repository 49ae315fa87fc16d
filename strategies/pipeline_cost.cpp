// pipeline_cost.cpp: pipeline parallelism's sends and sums per step (see pipeline_cost.hpp; each entry follows one
// call site of lab/train/pipeline_step.cpp).
#include "strategies/pipeline_cost.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "lab/dtype.hpp"

namespace dtlab {

void add_pipeline_collectives(CostPlan& plan, const Config& config, int rank) {
  const int P = static_cast<int>(config.parallel.pp);
  if (P <= 1) return;
  const int v = static_cast<int>(config.parallel.pp_virtual_stages), K = P * v;
  const int pp_rank = static_cast<int>(rank / (config.world_size / P));
  const int64_t m = std::max<int64_t>(1, config.train.accumulation);
  const ModelConfig& model = config.model;
  // The activations leave each chunk in the parameters' dtype (ddp computes in it).
  const Dtype dtype = dtype_named(config.precision.param_dtype, "precision.param_dtype");
  // Under sequence parallelism each tp rank sends its 1/tp of the sequence to the same tp rank of the next stage.
  const int64_t sequence_part = config.parallel.sequence_parallel ? std::max<int64_t>(1, config.parallel.tp) : 1;
  const int64_t a_bytes = config.train.micro_batch * model.seq_len / sequence_part * model.d_model * bytes_of(dtype);
  int64_t forward_sends = 0, backward_sends = 0;
  for (int c = 0; c < v; ++c) {
    const int k = c * P + pp_rank;
    forward_sends += k < K - 1 ? m : 0;
    backward_sends += k > 0 ? m : 0;
  }
  // The pp group's ranks are world / P apart (pp is the mesh's outermost dimension).
  const int stride = static_cast<int>(config.world_size / P);
  const auto add = [&](const char* op, const std::string& dtype_name, int64_t bytes, int group, const char* phase,
                       int64_t count, const char* what) {
    if (count == 0) return;
    PlannedCollective call{op, "backend", dtype_name, bytes, group, phase, count, what};
    call.stride = stride;
    call.mesh_dim = "pp";
    plan.collectives.push_back(call);
  };
  const std::string act(torch_name(dtype));
  add("send", act, a_bytes, 2, "forward", forward_sends, "activation to the next stage, per micro-batch");
  add("send", act, a_bytes, 2, "backward", backward_sends, "input gradient to the previous stage, per micro-batch");
  add("all_reduce", "float64", 8, P, "after-backward", 1, "loss: the last stage's, to every stage");
  add("all_reduce", "float64", 8, P, "after-backward", 1, "gradient norm's sum over the stages");
  if (config.precision.loss_scale == "dynamic")  // one stage skipping alone would leave the others a step ahead
    add("all_reduce", "float64", 8, P, "after-backward", 1, "loss scaling: found inf/nan, over the stages");
  // The data-parallel strategy reduces its gradients after the flush (Strategy::pipeline_access), not inside a
  // backward: no activation is alive beside them (the memory model) and nothing overlaps them (the step model).
  // Re-gathering per micro-batch (parallel.pp_reshard_after_forward), the calls run inside the chunks' actions: the
  // sharded plan gave them their chunk and phase.
  for (PlannedCollective& c : plan.collectives)
    if (c.mesh_dim == "dp" && c.phase == "backward" && c.chunk < 0) c.phase = "after-backward";
}

}  // namespace dtlab
