// model_plan.hpp: the model-parallel plan seam — how the model is split over the mesh's model-parallel dimensions,
// applied on every rank before anything else touches the model (before the data-parallel strategy wraps it).
//
// A plan does two things: it keeps on this rank the slice of each parameter its layout gives it, and it installs
// the ParallelLinear (lab/parallel_linear.hpp) whose collectives those slices need. It also describes the split of
// every parameter (which mesh dimension splits which axis), which checkpoints and the cost models read. Built:
// the identity plan (every rank holds the whole model, parallel.tp = parallel.pp = 1). Tensor parallelism is a plan
// that splits wq/wk/wv/w_gate/w_up by rows and wo/w_down by columns over tp; a pipeline stage's plan keeps only its
// chunks' units (lab/train/pipeline_plan.hpp); a StackedPlan applies several (pp x tp).
//
//   std::unique_ptr<ModelParallelPlan> plan = make_model_plan(config);
//   plan->apply(*model, comms);                   // lab/dist/mesh_comms.hpp
//   strategy.wrap(model, config, comms);          // the data-parallel wrapper sees the slices as the model
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lab/config.hpp"
#include "lab/mesh.hpp"

namespace dtlab {

class GPT;
class MeshComms;

// How one parameter is laid out over the mesh: split along `axis` of its full shape over `dim`, held whole by one
// rank of `dim` (axis -1: a pipeline stage's), or replicated (dim empty) on every rank of the model-parallel
// dimensions.
struct ParamSplit {
  std::string name;            // as GPT::parameters() names it
  std::optional<MeshDim> dim;  // nullopt: replicated
  int axis = -1;               // the axis of the full tensor the split cuts; -1 when replicated or held whole
};

class ModelParallelPlan {
 public:
  virtual ~ModelParallelPlan() = default;
  virtual std::string id() const = 0;
  // Collective over the model-parallel groups it uses. After it, `model` holds this rank's slices and layers.
  virtual void apply(GPT& model, MeshComms& comms) = 0;
  // Every parameter's split, in model order.
  virtual std::vector<ParamSplit> splits(GPT& model) const = 0;
  // A per-rank sum over the model-parallel ranks of one replica (the squared gradient norm: each rank sums its
  // slices, and the replicated parameters on one rank only, ParamRef::counted_in_norm). Collective for a plan that
  // splits; the identity plan returns `local`.
  virtual double sum_over_model_parallel(double local) { return local; }
};

// Every rank holds the whole model; nothing is split, no layer communicates.
class IdentityPlan final : public ModelParallelPlan {
 public:
  std::string id() const override { return "identity"; }
  void apply(GPT& model, MeshComms& comms) override;
  std::vector<ParamSplit> splits(GPT& model) const override;
};

// Plans of several model-parallel dimensions, applied outermost first: pp x tp keeps the stage's units, then slices
// them over tp. The gradient norm sums innermost first (over tp, then over pp); a parameter's split is the innermost
// plan's that cuts it along an axis (a stage's held tensor split over tp is described by its tp slice).
class StackedPlan final : public ModelParallelPlan {
 public:
  explicit StackedPlan(std::vector<std::unique_ptr<ModelParallelPlan>> plans);
  std::string id() const override;  // "pipeline x tensor_parallel"
  void apply(GPT& model, MeshComms& comms) override;
  std::vector<ParamSplit> splits(GPT& model) const override;
  double sum_over_model_parallel(double local) override;

 private:
  std::vector<std::unique_ptr<ModelParallelPlan>> plans_;
};

// The plan the config's model-parallel degrees ask for: the pipeline plan for parallel.pp > 1, the tensor-parallel
// plan for parallel.tp > 1 (lab/train/tensor_parallel_plan.hpp), both stacked for pp x tp, else the identity.
// parallel.cp > 1 is refused until built (config validation refuses it first, with the same rule).
std::unique_ptr<ModelParallelPlan> make_model_plan(const Config& config);

}  // namespace dtlab
