// tensor_parallel_plan.cpp: slicing the model over the tp group (see tensor_parallel_plan.hpp).
#include "lab/train/tensor_parallel_plan.hpp"

#include <memory>
#include <stdexcept>

#include "lab/comm/comm.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/memory.hpp"
#include "lab/model.hpp"
#include "lab/train/tensor_parallel.hpp"

namespace dtlab {

int tensor_parallel_axis(const std::string& name) {
  const std::string leaf = name.substr(name.rfind('.') + 1);
  if (leaf == "wq" || leaf == "wk" || leaf == "wv" || leaf == "w_gate" || leaf == "w_up") return 0;
  if (leaf == "wo" || leaf == "w_down") return 1;
  if (leaf == "tok_embedding" || leaf == "lm_head") return 0;
  return -1;  // the norms
}

void TensorParallelPlan::apply(GPT& model, MeshComms& comms) {
  tp_ = &comms.comm({MeshDim::tp});
  const int64_t t = tp_->size(), r = tp_->rank();
  at::NoGradGuard no_grad;
  MemoryScope params(MemoryCategory::params);  // the slices replace the whole tensors, which are freed
  for (const ParamRef& p : model.parameters()) {
    const int axis = tensor_parallel_axis(p.name);
    if (axis < 0) {
      if (r != 0) model.set_counted_in_norm(p.name, false);  // tp rank 0 counts the replicated norms
      continue;
    }
    const int64_t whole = p.tensor->size(axis);
    if (whole % t != 0)
      throw std::logic_error("tensor-parallel plan: " + p.name + " has " + std::to_string(whole) + " along axis " +
                             std::to_string(axis) + ", not divisible by tp=" + std::to_string(t) +
                             " (config validation should have refused it)");
    *p.tensor = p.tensor->narrow(axis, r * (whole / t), whole / t).clone().requires_grad_(true);
  }
  model.set_parallel_linear(
      std::make_shared<TensorParallelLinear>(*tp_, model.config().vocab_size, sequence_parallel_));
}

std::vector<ParamSplit> TensorParallelPlan::splits(GPT& model) const {
  std::vector<ParamSplit> out;
  for (const ParamRef& p : model.parameters()) {
    const int axis = tensor_parallel_axis(p.name);
    out.push_back({p.name, axis < 0 ? std::nullopt : std::optional<MeshDim>(MeshDim::tp), axis});
  }
  return out;
}

double TensorParallelPlan::sum_over_model_parallel(double local) {
  at::Tensor sum = at::full({1}, local, at::kDouble);
  tp_->all_reduce(sum, "tp.grad_norm").wait();
  return sum.item<double>();
}

}  // namespace dtlab
