// state_pieces.cpp: whole-tensor checkpoint pieces and the shared scalars (see state_pieces.hpp).
#include "lab/train/state_pieces.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

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
                   .written_here = written_here,
                   .chunk = {}});
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

StateLayout state_layout(const std::vector<ParamSplit>& splits, const DeviceMesh& mesh, int64_t rank) {
  StateLayout layout;
  // Model-parallel dimensions whose ranks hold copies of what they do not split (pp's ranks hold distinct units).
  const MeshDim copying[] = {MeshDim::cp, MeshDim::tp};
  for (const ParamSplit& split : splits) {
    if (split.dim && split.axis >= 0)
      layout.slices[split.name] = {split.axis, mesh.coord(rank, *split.dim), mesh.size(*split.dim)};
    for (const MeshDim dim : copying)
      if (mesh.size(dim) > 1 && split.dim != dim && mesh.coord(rank, dim) != 0) {
        layout.written_elsewhere.push_back(split.name);
        break;
      }
  }
  return layout;
}

namespace {

// "param.blocks.0.wq" and "optim.exp_avg.blocks.0.wq" -> "blocks.0.wq"; "" for state of no parameter.
std::string parameter_of(const std::string& piece_name) {
  if (piece_name.rfind("param.", 0) == 0) return piece_name.substr(6);
  if (piece_name.rfind("optim.", 0) == 0) {
    const size_t kind_end = piece_name.find('.', 6);
    return kind_end == std::string::npos ? "" : piece_name.substr(kind_end + 1);
  }
  return "";
}

}  // namespace

void place_in_whole_tensors(std::vector<StatePiece>& pieces, const StateLayout& layout) {
  for (StatePiece& p : pieces) {
    const std::string param = parameter_of(p.name);
    if (param.empty()) continue;
    const auto& elsewhere = layout.written_elsewhere;
    if (std::find(elsewhere.begin(), elsewhere.end(), param) != elsewhere.end()) p.written_here = false;
    const auto it = layout.slices.find(param);
    if (it == layout.slices.end()) continue;
    const TensorSlice& slice = it->second;
    if (slice.axis >= static_cast<int>(p.shape.size()) || !p.chunk.shape.empty())
      throw std::logic_error("checkpoint: '" + p.name + "' of shape " + std::to_string(p.shape.size()) +
                             "-D cannot be a slice along axis " + std::to_string(slice.axis) +
                             (p.chunk.shape.empty() ? "" : " (it is a chunk already)"));
    p.chunk = checkpoint::Chunk{std::vector<int64_t>(p.shape.size(), 0), p.shape};
    const auto axis = static_cast<size_t>(slice.axis);
    p.chunk.offsets[axis] = slice.index * p.shape[axis];
    p.shape[axis] *= slice.count;
  }
}

}  // namespace dtlab
