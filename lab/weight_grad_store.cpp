// weight_grad_store.cpp: the deferred weight gradients of zero bubble's W (see weight_grad_store.hpp).
#include "lab/weight_grad_store.hpp"

#include <stdexcept>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

namespace dtlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local WeightGradStore* g_capture = nullptr;

struct DeferredWeightLinear : torch::autograd::Function<DeferredWeightLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, WeightGradStore* store) {
    ctx->saved_data["store"] = reinterpret_cast<int64_t>(store);
    ctx->save_for_backward({x, w});
    return at::linear(x, w);
  }
  // The input's gradient now; the weight's is filed for W (the node returns none, so autograd gives the weight no
  // gradient here).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* store = reinterpret_cast<WeightGradStore*>(ctx->saved_data["store"].toInt());
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor& g = grads[0];
    at::Tensor grad_x = ctx->needs_input_grad(0) ? at::matmul(g, w) : at::Tensor();
    if (ctx->needs_input_grad(1) && g.defined()) store->file(x.detach(), g.detach(), w);
    return {grad_x, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void WeightGradStore::file(const at::Tensor& input, const at::Tensor& grad_output, const at::Tensor& weight) {
  filed_.push_back({input, grad_output, weight});
}

void WeightGradStore::apply() {
  if (filed_.empty()) return;
  std::vector<at::Tensor> weights, grads;
  for (const Filed& f : filed_) {
    const int64_t out = f.grad_output.size(-1), in = f.input.size(-1);
    weights.push_back(f.weight);
    grads.push_back(f.grad_output.reshape({-1, out}).t().mm(f.input.reshape({-1, in})));
  }
  filed_.clear();
  torch::autograd::backward(weights, grads);
}

WeightGradCapture::WeightGradCapture(WeightGradStore& store) {
  if (g_capture != nullptr) throw std::logic_error("WeightGradCapture: a capture is already active on this thread");
  g_capture = &store;
}

WeightGradCapture::~WeightGradCapture() { g_capture = nullptr; }

at::Tensor deferrable_linear(const at::Tensor& x, const at::Tensor& w) {
  if (g_capture == nullptr || !at::GradMode::is_enabled() || !w.requires_grad()) return at::linear(x, w);
  return DeferredWeightLinear::apply(x, w, g_capture);
}

}  // namespace dtlab
