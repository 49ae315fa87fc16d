// state_pieces.hpp: the training state of strategies that hold whole tensors (single, ddp and the like) as checkpoint
// pieces (lab/train/strategy.hpp StatePiece), the scalars every strategy shares, and where a model-parallel slice's
// pieces sit in the whole tensor (StateLayout).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "lab/mesh.hpp"
#include "lab/train/loss_scaler.hpp"
#include "lab/train/model_plan.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/train/strategy.hpp"

namespace dtlab {

// Where this rank's training state sits in the whole tensors, by parameter name (as GPT::parameters() names it):
// the slice a model-parallel plan cut (the tensor-parallel slice r of t along `axis`), and the parameters this rank
// holds a copy of that another rank of a model-parallel dimension writes (tp's replicated norms: tp rank 0 writes).
// Empty for the identity and pipeline plans (a stage holds whole tensors, which no other stage holds).
struct TensorSlice {
  int axis = 0;
  int64_t index = 0, count = 1;  // slice `index` of `count` equal ones
};
struct StateLayout {
  std::map<std::string, TensorSlice> slices;
  std::vector<std::string> written_elsewhere;
};
StateLayout state_layout(const std::vector<ParamSplit>& splits, const DeviceMesh& mesh, int64_t rank);
// Rewrites the pieces of sliced parameters (their "param." and "optim.<kind>." tensors) as pieces of the chunk the
// slice is of the whole tensor, and clears written_here for copies another rank writes. Throws std::logic_error for a
// slice axis the piece's tensor does not have.
void place_in_whole_tensors(std::vector<StatePiece>& pieces, const StateLayout& layout);

// One whole-tensor piece per parameter ("param.<name>") and per optimizer state of it ("optim.<kind>.<name>").
// `params[i]` is what the optimizer updates for parameter `names[i]`; `written_here`: this rank writes them (replicas:
// one rank does).
std::vector<StatePiece> whole_tensor_pieces(const std::vector<std::string>& names,
                                            const std::vector<at::Tensor>& params, Optimizer& optimizer,
                                            bool written_here);

// Scalar names, shared by every strategy.
inline constexpr const char* kOptimizerStepsScalar = "optimizer.steps";
inline constexpr const char* kLossScaleScalar = "loss_scaler.scale";
inline constexpr const char* kLossScaleGoodStepsScalar = "loss_scaler.good_steps";
inline constexpr const char* kStepsSeenScalar = "strategy.steps_seen";

// The optimizer's steps and the loss scaler's state (`scaler` null: the strategy has none), and back. restore reads
// what is present (a checkpoint of a run without loss scaling has no scaler entries: the scaler keeps its initial
// scale).
void add_common_scalars(std::map<std::string, double>& scalars, const Optimizer& optimizer, const LossScaler* scaler);
void restore_common_scalars(const std::map<std::string, double>& scalars, Optimizer& optimizer, LossScaler* scaler);

}  // namespace dtlab
