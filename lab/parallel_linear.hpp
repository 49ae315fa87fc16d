// parallel_linear.hpp: the parallel-linear seam — how GPT's linear layers, embedding, head and loss run, so a
// model-parallel plan (lab/train/model_plan.hpp) can split them without branches in the model's forward.
//
// GPT calls, per block half (attention, MLP), in Megatron's f/g form:
//   h = enter(norm(x))                              the input of the column-parallel linears (wq, wk, wv; w_gate, w_up)
//   y = row(column(h, w_in) ..., w_out)             the layers; heads and hidden width follow the weights' shapes
//   x = x + leave(y)                                the row-parallel output made whole for the residual
// and embed(), logits() and loss_sum() for the vocabulary. This class is the whole-model case (one rank holds every
// weight: each call is the plain operation). Tensor parallelism overrides it: enter = identity forward and
// all-reduce of the gradient in backward, leave = all-reduce forward (sequence parallel: all-gather and
// reduce-scatter), a vocabulary-parallel embedding, head and cross-entropy. Every linear goes through
// deferrable_linear (lab/weight_grad_store.hpp), so zero bubble's W can take the weights' gradients out of B.
#pragma once

#include <string>

#include <ATen/ATen.h>

#include "lab/weight_grad_store.hpp"

namespace dtlab {

class ParallelLinear {
 public:
  virtual ~ParallelLinear() = default;
  virtual std::string id() const { return "whole"; }
  // A norm's weight as the norm uses it: every rank holds the whole weight (sequence parallelism sums its gradient
  // over the ranks, each of which normed a part of the sequence).
  virtual at::Tensor replicated(const at::Tensor& w) const { return w; }
  // The normed activation entering a block half's column-parallel linears.
  virtual at::Tensor enter(const at::Tensor& h) const { return h; }
  // x W^T for a layer whose output features a plan may split (column-parallel).
  virtual at::Tensor column(const at::Tensor& x, const at::Tensor& w) const { return deferrable_linear(x, w); }
  // x W^T for a layer whose input features a plan may split (row-parallel); its output may be partial until leave().
  virtual at::Tensor row(const at::Tensor& x, const at::Tensor& w) const { return deferrable_linear(x, w); }
  // A row-parallel output leaving the block half, to be added to the residual stream.
  virtual at::Tensor leave(const at::Tensor& y) const { return y; }
  // Token embedding: tokens [B, S] -> [B, S, d].
  virtual at::Tensor embed(const at::Tensor& table, const at::Tensor& tokens) const;
  // LM head: the final normed activation -> logits [B, S, V] (a vocabulary-parallel plan keeps V / t of them).
  virtual at::Tensor logits(const at::Tensor& h, const at::Tensor& w) const { return deferrable_linear(h, w); }
  // Sum of token cross-entropies over targets != kIgnoreIndex (fp32 accumulation), from logits() as this rank holds
  // them.
  virtual at::Tensor loss_sum(const at::Tensor& logits, const at::Tensor& targets) const;
};

}  // namespace dtlab
