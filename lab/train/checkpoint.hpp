// checkpoint.hpp: activation checkpointing of transformer blocks through a custom autograd function.
//
// parallel.activation_checkpointing:
//   none       keep every activation for backward
//   full       every block (or every k-th, parallel.checkpoint_every): forward keeps only the block's
//              input; backward recomputes the block (with grad) from it and backpropagates through the
//              recomputation (reentrant)
//   selective  recompute only the attention half of every block (its activations are the largest
//              per token at long sequences); the MLP half keeps its activations
// The recomputation runs the model's own block code with whatever tensors the model's parameters are
// at that moment — under FULL_SHARD those are the re-gathered parameters. Recomputation is
// bit-identical to the original forward (deterministic ops, no dropout), so AC changes memory and
// time, never the numbers.
#pragma once

#include <string>

#include <ATen/ATen.h>

namespace dtlab {

class GPT;

enum class CheckpointMode { none, full, selective };
CheckpointMode checkpoint_mode(const std::string& config_value);  // throws std::invalid_argument

// Block `index` of `model` applied to x under `mode`; with full, only blocks whose index is a multiple
// of `every` are checkpointed.
at::Tensor run_block(GPT& model, int64_t index, const at::Tensor& x, CheckpointMode mode, int64_t every = 1);

// The whole model forward (embedding, blocks under `mode`, head) -> logits.
at::Tensor forward_with_checkpointing(GPT& model, const at::Tensor& tokens, CheckpointMode mode, int64_t every = 1);

}  // namespace dtlab
