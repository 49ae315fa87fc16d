// tensor_parallel.hpp: Megatron-style tensor parallelism's layers — the ParallelLinear (lab/parallel_linear.hpp) a
// tensor-parallel plan (lab/train/tensor_parallel_plan.hpp) installs on every rank of a tp group.
//
// Each block half runs as column-parallel linears (wq, wk, wv; w_gate, w_up: this rank's rows = its heads, its
// slice of the hidden width), then a row-parallel one (wo; w_down: the matching columns), so the only collectives
// are at the half's two ends (Megatron's f and g):
//   enter(h)  forward: identity          backward: all-reduce of the gradient over tp (every rank's slice of dh)
//   leave(y)  forward: all-reduce over tp (the partial products summed)  backward: identity
// The vocabulary is split too (rows [r·V/t, (r+1)·V/t) of the embedding and the head on tp rank r):
//   embed     each rank looks up the tokens in its rows (zeros elsewhere), then leave() sums them
//   logits    [B, S, V/t] of this rank's vocabulary; no rank materialises the whole logits
//   loss_sum  vocabulary-parallel cross-entropy: each rank's row maxima are all-gathered (the max over the whole
//             vocabulary, a shift), the sum of exponentials and each target's logit all-reduced over tp — calls of
//             [tokens] elements, never [tokens, V]
// Every rank of the group computes the same loss; each parameter gradient is its slice's (the replicated norms' are
// the same on every rank, computed from the same activations).
//
// Sequence parallelism (parallel.sequence_parallel) keeps the norm and residual regions split along the sequence
// (each rank [B, S/t, d]), so their activations take 1/t of the memory:
//   enter(h)  forward: all-gather along the sequence          backward: reduce-scatter along the sequence
//   leave(y)  forward: reduce-scatter along the sequence      backward: all-gather along the sequence
//   the embedding reduce-scatters its rows' sum; the head all-gathers the normed sequence before its logits
//   replicated(norm weight): identity forward, all-reduce of its gradient (each rank normed its part of the sequence)
// The same bytes as tensor parallelism's all-reduces, in twice the calls. The cost piece that counts every call
// here per step is strategies/tensor_parallel_cost.hpp.
#pragma once

#include <string>

#include <ATen/ATen.h>

#include "lab/parallel_linear.hpp"

namespace dtlab {

class Comm;

// The tp group's collectives as autograd operations (what enter/leave use; public for tests).
at::Tensor copy_to_tensor_parallel(const at::Tensor& x, Comm& tp);      // f: identity, all-reduce in backward
at::Tensor reduce_from_tensor_parallel(const at::Tensor& x, Comm& tp);  // g: all-reduce, identity in backward
// [B, S/t, d] -> [B, S, d] (all-gather along dim 1; reduce-scatter in backward), and the reverse.
at::Tensor gather_sequence(const at::Tensor& x, Comm& tp);
at::Tensor scatter_sequence(const at::Tensor& x, Comm& tp);

class TensorParallelLinear final : public ParallelLinear {
 public:
  // `tp`: this rank's tp group; `vocab_size`: the whole vocabulary (this rank holds vocab_size / tp.size() rows);
  // `sequence_parallel`: the norm and residual regions split along the sequence.
  TensorParallelLinear(Comm& tp, int64_t vocab_size, bool sequence_parallel);
  std::string id() const override { return sequence_parallel_ ? "sequence_parallel" : "tensor_parallel"; }
  at::Tensor replicated(const at::Tensor& w) const override;
  at::Tensor enter(const at::Tensor& h) const override;
  at::Tensor leave(const at::Tensor& y) const override;
  at::Tensor embed(const at::Tensor& table, const at::Tensor& tokens) const override;
  at::Tensor logits(const at::Tensor& h, const at::Tensor& w) const override;
  at::Tensor loss_sum(const at::Tensor& logits, const at::Tensor& targets) const override;

 private:
  Comm& tp_;
  int64_t vocab_begin_, vocab_end_;  // this rank's rows of the vocabulary
  bool sequence_parallel_;
};

}  // namespace dtlab
