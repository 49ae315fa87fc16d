// pipeline_plan.hpp: the pipeline stage's model-parallel plan — this rank keeps only the model units of its chunks.
//
// The blocks are cut into P·v virtual stages (lab/pipeline_split.hpp: balanced, or parallel.pp_split); this rank,
// at index r of its pp group, runs virtual stages r, r + P, ... (its chunks 0..v-1) and frees every other unit's
// weights (GPT::keep_units), so the data-parallel strategy wrapped around it sees only them. Every parameter lives
// whole on one pp rank; the gradient norm sums the stages' parts over the pp group.
//
//   PipelinePlan plan(config);
//   plan.apply(model, comms);   // model now holds the units of this rank's chunks
#pragma once

#include <string>
#include <vector>

#include "lab/train/model_plan.hpp"

namespace dtlab {

class Comm;

class PipelinePlan final : public ModelParallelPlan {
 public:
  explicit PipelinePlan(const Config& config);
  std::string id() const override { return "pipeline"; }
  void apply(GPT& model, MeshComms& comms) override;
  // Each parameter held by this rank: on the pp dimension, not cut along an axis (axis -1).
  std::vector<ParamSplit> splits(GPT& model) const override;
  double sum_over_model_parallel(double local) override;  // over the pp group

 private:
  int n_layers_, stages_, virtual_stages_;
  std::string split_;
  Comm* pp_ = nullptr;
};

// The model units of chunk c of the rank at index `pp_rank` (virtual stage c·P + pp_rank), for every chunk.
std::vector<std::vector<int>> pipeline_chunk_units(const Config& config, int pp_rank);

}  // namespace dtlab
