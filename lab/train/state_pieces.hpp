// state_pieces.hpp: the training state of strategies that hold whole tensors (single, ddp and the like) as checkpoint
// pieces (lab/train/strategy.hpp StatePiece), and the scalars every strategy shares.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "lab/train/loss_scaler.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/train/strategy.hpp"

namespace dtlab {

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
