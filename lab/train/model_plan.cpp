// model_plan.cpp: the identity plan and the choice of plan (see model_plan.hpp).
#include "lab/train/model_plan.hpp"

#include <stdexcept>
#include <utility>

#include "lab/dist/mesh_comms.hpp"
#include "lab/model.hpp"
#include "lab/train/pipeline_plan.hpp"
#include "lab/train/tensor_parallel_plan.hpp"

namespace dtlab {

void IdentityPlan::apply(GPT& model, MeshComms& comms) {
  const ParallelDims& dims = comms.mesh().dims();
  if (dims.model_parallel() != 1)
    throw std::logic_error("identity plan on mesh " + comms.mesh().describe() +
                           ": the whole model on every rank needs pp = cp = tp = 1");
  model.set_parallel_linear(std::make_shared<ParallelLinear>());
}

std::vector<ParamSplit> IdentityPlan::splits(GPT& model) const {
  std::vector<ParamSplit> out;
  for (const ParamRef& p : model.parameters()) out.push_back({p.name, std::nullopt, -1});
  return out;
}

std::unique_ptr<ModelParallelPlan> make_model_plan(const Config& config) {
  const ParallelConfig& p = config.parallel;
  if (p.cp > 1)
    throw std::invalid_argument("parallel.cp=" + std::to_string(p.cp) +
                                ": this model-parallel dimension is not built yet; use parallel.cp=1");
  if (p.pp > 1 && p.tp > 1)
    throw std::invalid_argument("parallel.pp=" + std::to_string(p.pp) + " with parallel.tp=" + std::to_string(p.tp) +
                                ": pipeline x tensor parallel is not built yet; choose one of them");
  if (p.pp > 1) return std::make_unique<PipelinePlan>(config);
  if (p.tp > 1) return std::make_unique<TensorParallelPlan>(p.sequence_parallel);
  return std::make_unique<IdentityPlan>();
}

}  // namespace dtlab
