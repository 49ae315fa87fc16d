// pipeline_plan.cpp: keeping this pipeline rank's units (see pipeline_plan.hpp).
#include "lab/train/pipeline_plan.hpp"

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/model.hpp"
#include "lab/pipeline_split.hpp"

namespace dtlab {

std::vector<std::vector<int>> pipeline_chunk_units(const Config& config, int pp_rank) {
  const int P = static_cast<int>(config.parallel.pp), v = static_cast<int>(config.parallel.pp_virtual_stages);
  const auto stages = pipeline_stage_units(static_cast<int>(config.model.n_layers), P * v, config.parallel.pp_split);
  std::vector<std::vector<int>> chunks;
  for (int c = 0; c < v; ++c) chunks.push_back(stages[static_cast<size_t>(c * P + pp_rank)]);
  return chunks;
}

PipelinePlan::PipelinePlan(const Config& config)
    : n_layers_(static_cast<int>(config.model.n_layers)),
      stages_(static_cast<int>(config.parallel.pp)),
      virtual_stages_(static_cast<int>(config.parallel.pp_virtual_stages)),
      split_(config.parallel.pp_split) {}

void PipelinePlan::apply(GPT& model, MeshComms& comms) {
  pp_ = &comms.comm({MeshDim::pp});
  const auto stages = pipeline_stage_units(n_layers_, stages_ * virtual_stages_, split_);
  std::vector<int> held;
  for (int c = 0; c < virtual_stages_; ++c)
    for (int m : stages[static_cast<size_t>(c * stages_ + pp_->rank())]) held.push_back(m);
  model.keep_units(held);
}

std::vector<ParamSplit> PipelinePlan::splits(GPT& model) const {
  std::vector<ParamSplit> out;
  for (const ParamRef& p : model.parameters()) out.push_back({p.name, MeshDim::pp, -1});
  return out;
}

double PipelinePlan::sum_over_model_parallel(double local) {
  at::Tensor sum = at::full({1}, local, at::kDouble);
  pp_->all_reduce(sum, "pp.grad_norm").wait();
  return sum.item<double>();
}

}  // namespace dtlab
