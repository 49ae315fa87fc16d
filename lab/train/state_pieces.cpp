// state_pieces.cpp: whole-tensor checkpoint pieces and the shared scalars (see state_pieces.hpp).
#include "lab/train/state_pieces.hpp"

#include <cmath>

namespace dtlab {

std::vector<StatePiece> whole_tensor_pieces(const std::vector<std::string>& names,
                                            const std::vector<at::Tensor>& params, Optimizer& optimizer,
                                            bool written_here) {
  std::vector<StatePiece> out;
  auto piece = [&](const std::string& name, const at::Tensor& t) {
    out.push_back({.name = name,
                   .shape = t.sizes().vec(),
                   .begin = 0,
                   .data = t.detach().view({-1}),
                   .written_here = written_here});
  };
  for (size_t i = 0; i < params.size(); ++i) piece("param." + names[i], params[i]);
  for (const std::string& kind : optimizer.state_kinds())
    for (size_t i = 0; i < params.size(); ++i) piece("optim." + kind + "." + names[i], optimizer.state(kind, i));
  return out;
}

void add_common_scalars(std::map<std::string, double>& scalars, const Optimizer& optimizer, const LossScaler* scaler) {
  scalars[kOptimizerStepsScalar] = static_cast<double>(optimizer.steps_taken());
  if (scaler != nullptr && scaler->enabled()) {
    scalars[kLossScaleScalar] = scaler->scale();
    scalars[kLossScaleGoodStepsScalar] = static_cast<double>(scaler->good_steps());
  }
}

void restore_common_scalars(const std::map<std::string, double>& scalars, Optimizer& optimizer, LossScaler* scaler) {
  if (const auto it = scalars.find(kOptimizerStepsScalar); it != scalars.end())
    optimizer.set_steps_taken(std::llround(it->second));
  const auto scale = scalars.find(kLossScaleScalar);
  const auto good = scalars.find(kLossScaleGoodStepsScalar);
  if (scaler != nullptr && scaler->enabled() && scale != scalars.end() && good != scalars.end())
    scaler->restore(scale->second, std::llround(good->second));
}

}  // namespace dtlab
