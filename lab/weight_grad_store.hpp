// weight_grad_store.hpp: linear layers whose weight gradient can wait — zero bubble's split backward.
//
// A linear layer's backward is two GEMMs: the input's gradient g·W, which the layer below (and the previous pipeline
// stage) waits for, and the weight's gradient gᵀ·x, which nothing waits for. Zero-bubble schedules (ZB-H1,
// lab/pipeline_schedule.hpp) run the first in B and move the second into W, where it fills the bubble. While a
// WeightGradCapture is alive, deferrable_linear() builds a node whose backward computes only g·W and files
// (x, g, W) in the capture's store; WeightGradStore::apply() later computes each gᵀ·x and backpropagates it from the
// weight the layer used, so it reaches the parameter through any cast or view and the parameter's hooks fire as in a
// plain backward. Outside a capture deferrable_linear() is at::linear (the same numbers, no extra node).
//
//   WeightGradStore store;
//   { WeightGradCapture capture(store); y = chunk(x); }                     // F: the linears record into `store`
//   torch::autograd::backward({y}, {g}, /*retain_graph=*/true);            // B: activation grads, norms, embedding
//   store.apply();                                                          // W: every linear's weight gradient
//
// The store must outlive the graph built under its capture (the nodes hold a plain pointer to it).
#pragma once

#include <cstddef>
#include <vector>

#include <ATen/ATen.h>

namespace dtlab {

class WeightGradStore {
 public:
  // Called by a deferred node's backward: the layer's input (detached: only its values are needed), the gradient of
  // its output and the weight as the forward used it.
  void file(const at::Tensor& input, const at::Tensor& grad_output, const at::Tensor& weight);
  // The weight gradients of every filed layer, each backpropagated from its weight in one autograd call; empties the
  // store. Nothing filed: nothing happens.
  void apply();
  size_t pending() const { return filed_.size(); }

 private:
  struct Filed {
    at::Tensor input, grad_output, weight;
  };
  std::vector<Filed> filed_;
};

// While alive, deferrable_linear() on this thread files its weight gradients into `store`. Captures do not nest.
class WeightGradCapture {
 public:
  explicit WeightGradCapture(WeightGradStore& store);
  ~WeightGradCapture();
  WeightGradCapture(const WeightGradCapture&) = delete;
  WeightGradCapture& operator=(const WeightGradCapture&) = delete;
};

// x Wᵀ (W: [out, in], no bias); under a capture with grad enabled, a node that defers W's gradient to the store.
at::Tensor deferrable_linear(const at::Tensor& x, const at::Tensor& w);

}  // namespace dtlab
