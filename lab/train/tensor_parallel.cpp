// tensor_parallel.cpp: the tensor-parallel layers and their autograd collectives (see tensor_parallel.hpp).
#include "lab/train/tensor_parallel.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include "lab/comm/comm.hpp"
#include "lab/data.hpp"

namespace dtlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A sum over the tp group of a copy of `x` (the input is left alone: autograd may have saved it).
at::Tensor all_reduced(const at::Tensor& x, Comm& tp, const std::string& tag) {
  at::Tensor sum = x.contiguous().clone();
  tp.all_reduce(sum, tag).wait();
  return sum;
}

struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Comm* tp) {
    ctx->saved_data["tp"] = reinterpret_cast<int64_t>(tp);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* tp = reinterpret_cast<Comm*>(ctx->saved_data["tp"].toInt());
    return {all_reduced(grads[0], *tp, "tp.enter.backward"), at::Tensor()};
  }
};

struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, Comm* tp) { return all_reduced(x, *tp, "tp.leave"); }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

// [B, s, d] on each rank -> [B, t*s, d], rank r's part at [r*s, (r+1)*s) of dim 1.
at::Tensor all_gathered_sequence(const at::Tensor& x, Comm& tp, const std::string& tag) {
  return tp.all_gather_along(x, 1, CommAlgorithm::backend, tag);
}

// [B, S, d] on each rank -> this rank's [B, S/t, d] part of the sum over ranks.
at::Tensor reduce_scattered_sequence(const at::Tensor& y, Comm& tp, const std::string& tag) {
  return tp.reduce_scatter_along(y, 1, CommAlgorithm::ring, tag);
}

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Comm* tp) {
    ctx->saved_data["tp"] = reinterpret_cast<int64_t>(tp);
    return all_gathered_sequence(x, *tp, "sp.gather");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* tp = reinterpret_cast<Comm*>(ctx->saved_data["tp"].toInt());
    return {reduce_scattered_sequence(grads[0], *tp, "sp.gather.backward"), at::Tensor()};
  }
};

struct ScatterSequence : torch::autograd::Function<ScatterSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, Comm* tp) {
    ctx->saved_data["tp"] = reinterpret_cast<int64_t>(tp);
    return reduce_scattered_sequence(y, *tp, "sp.scatter");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* tp = reinterpret_cast<Comm*>(ctx->saved_data["tp"].toInt());
    return {all_gathered_sequence(grads[0], *tp, "sp.scatter.backward"), at::Tensor()};
  }
};

}  // namespace

at::Tensor gather_sequence(const at::Tensor& x, Comm& tp) { return GatherSequence::apply(x, &tp); }
at::Tensor scatter_sequence(const at::Tensor& x, Comm& tp) { return ScatterSequence::apply(x, &tp); }

at::Tensor copy_to_tensor_parallel(const at::Tensor& x, Comm& tp) { return CopyToTensorParallel::apply(x, &tp); }
at::Tensor reduce_from_tensor_parallel(const at::Tensor& x, Comm& tp) {
  return ReduceFromTensorParallel::apply(x, &tp);
}

TensorParallelLinear::TensorParallelLinear(Comm& tp, int64_t vocab_size, bool sequence_parallel)
    : tp_(tp),
      vocab_begin_(vocab_size / tp.size() * tp.rank()),
      vocab_end_(vocab_size / tp.size() * (tp.rank() + 1)),
      sequence_parallel_(sequence_parallel) {}

at::Tensor TensorParallelLinear::replicated(const at::Tensor& w) const {
  return sequence_parallel_ ? copy_to_tensor_parallel(w, tp_) : w;
}

at::Tensor TensorParallelLinear::enter(const at::Tensor& h) const {
  return sequence_parallel_ ? gather_sequence(h, tp_) : copy_to_tensor_parallel(h, tp_);
}

at::Tensor TensorParallelLinear::leave(const at::Tensor& y) const {
  return sequence_parallel_ ? scatter_sequence(y, tp_) : reduce_from_tensor_parallel(y, tp_);
}

at::Tensor TensorParallelLinear::embed(const at::Tensor& table, const at::Tensor& tokens) const {
  // Tokens outside this rank's rows look up row 0 and are zeroed; the sum over tp leaves each token its own row.
  const at::Tensor mine = tokens.ge(vocab_begin_).logical_and(tokens.lt(vocab_end_));
  const at::Tensor local = at::where(mine, tokens - vocab_begin_, at::zeros_like(tokens));
  const at::Tensor rows = at::embedding(table, local) * mine.unsqueeze(-1).to(table.scalar_type());
  return leave(rows);
}

at::Tensor TensorParallelLinear::logits(const at::Tensor& h, const at::Tensor& w) const {
  return deferrable_linear(enter(h), w);
}

at::Tensor TensorParallelLinear::loss_sum(const at::Tensor& logits, const at::Tensor& targets) const {
  const at::Tensor x = logits.reshape({-1, logits.size(-1)}).to(at::kFloat);  // [N, V/t], fp32 as the loss upcasts
  const at::Tensor t = targets.reshape({-1});
  // The max over the whole vocabulary, a constant shift for stability (no gradient flows through it).
  at::Tensor local_max = std::get<0>(x.detach().max(-1));
  at::Tensor maxima = at::empty({tp_.size() * local_max.numel()}, local_max.options());
  tp_.all_gather(maxima, local_max, CommAlgorithm::backend, "tp.loss.max").wait();
  const at::Tensor global_max = std::get<0>(maxima.view({tp_.size(), -1}).max(0));
  const at::Tensor shifted = x - global_max.unsqueeze(-1);
  const at::Tensor sum_exp = reduce_from_tensor_parallel(shifted.exp().sum(-1), tp_);
  // Each target's shifted logit, from the rank whose rows hold it (zeros elsewhere, summed over tp).
  const at::Tensor mine = t.ge(vocab_begin_).logical_and(t.lt(vocab_end_));
  const at::Tensor local = at::where(mine, t - vocab_begin_, at::zeros_like(t));
  const at::Tensor picked = shifted.gather(1, local.unsqueeze(1)).squeeze(1) * mine.to(at::kFloat);
  const at::Tensor target_logit = reduce_from_tensor_parallel(picked, tp_);
  const at::Tensor counted = t.ne(kIgnoreIndex).to(at::kFloat);
  return ((sum_exp.log() - target_logit) * counted).sum();
}

}  // namespace dtlab
