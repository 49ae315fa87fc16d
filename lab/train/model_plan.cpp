// model_plan.cpp: the identity plan and the choice of plan (see model_plan.hpp).
#include "lab/train/model_plan.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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
  std::vector<std::unique_ptr<ModelParallelPlan>> plans;
  if (p.pp > 1) plans.push_back(std::make_unique<PipelinePlan>(config));
  if (p.tp > 1) plans.push_back(std::make_unique<TensorParallelPlan>(p.sequence_parallel));
  if (plans.empty()) return std::make_unique<IdentityPlan>();
  if (plans.size() == 1) return std::move(plans.front());
  return std::make_unique<StackedPlan>(std::move(plans));
}

StackedPlan::StackedPlan(std::vector<std::unique_ptr<ModelParallelPlan>> plans) : plans_(std::move(plans)) {
  if (plans_.empty()) throw std::logic_error("StackedPlan: no plan to stack");
}

std::string StackedPlan::id() const {
  std::string out;
  for (const auto& plan : plans_) out += (out.empty() ? "" : " x ") + plan->id();
  return out;
}

void StackedPlan::apply(GPT& model, MeshComms& comms) {
  for (const auto& plan : plans_) plan->apply(model, comms);
}

std::vector<ParamSplit> StackedPlan::splits(GPT& model) const {
  std::vector<ParamSplit> out = plans_.front()->splits(model);
  for (size_t i = 1; i < plans_.size(); ++i) {
    const std::vector<ParamSplit> inner = plans_[i]->splits(model);
    for (size_t j = 0; j < out.size() && j < inner.size(); ++j)
      if (inner[j].dim && inner[j].axis >= 0) out[j] = inner[j];  // cut along an axis: the inner plan's split
  }
  return out;
}

double StackedPlan::sum_over_model_parallel(double local) {
  // Innermost first: a stage's tp ranks sum their slices, then the stages sum their parts.
  for (auto it = plans_.rbegin(); it != plans_.rend(); ++it) local = (*it)->sum_over_model_parallel(local);
  return local;
}

}  // namespace dtlab
