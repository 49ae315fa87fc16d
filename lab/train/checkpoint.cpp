// checkpoint.cpp: reentrant activation checkpointing (see checkpoint.hpp).
#include "lab/train/checkpoint.hpp"

#include <algorithm>
#include <stdexcept>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "lab/model.hpp"

namespace dtlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a checkpointed region computes: a whole block, or only its attention half.
enum class Region : int64_t { block = 0, attention = 1 };

at::Tensor compute(GPT& model, int64_t index, Region region, const at::Tensor& x) {
  return region == Region::block ? model.block(index, x) : model.block_attention(index, x);
}

struct CheckpointedRegion : torch::autograd::Function<CheckpointedRegion> {
  // Runs without recording a graph (Function::apply disables grad mode); keeps only x.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, GPT* model, int64_t index, int64_t region) {
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["index"] = index;
    ctx->saved_data["region"] = region;
    ctx->save_for_backward({x});
    return {compute(*model, index, static_cast<Region>(region), x)};
  }

  // Recomputes the region with grad enabled from the saved input and backpropagates through it;
  // parameter gradients accumulate (and their hooks fire) inside this nested backward.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* model = reinterpret_cast<GPT*>(ctx->saved_data["model"].toInt());
    const int64_t index = ctx->saved_data["index"].toInt();
    const auto region = static_cast<Region>(ctx->saved_data["region"].toInt());
    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor y;
    {
      at::AutoGradMode enable_grad(true);
      y = compute(*model, index, region, x);
    }
    torch::autograd::backward({y}, {grad_outputs[0]});
    return {x.grad(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

CheckpointMode checkpoint_mode(const std::string& value) {
  if (value == "none") return CheckpointMode::none;
  if (value == "full") return CheckpointMode::full;
  if (value == "selective") return CheckpointMode::selective;
  throw std::invalid_argument("parallel.activation_checkpointing='" + value +
                              "' is not one of none | full | selective");
}

at::Tensor run_block(GPT& model, int64_t index, const at::Tensor& x, CheckpointMode mode, int64_t every) {
  if (mode == CheckpointMode::full && index % std::max<int64_t>(1, every) != 0) mode = CheckpointMode::none;
  switch (mode) {
    case CheckpointMode::none:
      return model.block(index, x);
    case CheckpointMode::full:
      return CheckpointedRegion::apply(x, &model, index, static_cast<int64_t>(Region::block))[0];
    case CheckpointMode::selective: {
      at::Tensor h = CheckpointedRegion::apply(x, &model, index, static_cast<int64_t>(Region::attention))[0];
      return model.block_mlp(index, h);
    }
  }
  return model.block(index, x);
}

at::Tensor forward_with_checkpointing(GPT& model, const at::Tensor& tokens, CheckpointMode mode, int64_t every) {
  at::Tensor x = model.embed(tokens);
  for (int64_t l = 0; l < model.config().n_layers; ++l) x = run_block(model, l, x, mode, every);
  return model.head(x);
}

}  // namespace dtlab
