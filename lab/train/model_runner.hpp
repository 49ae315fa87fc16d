// model_runner.hpp: forward, loss and backward of one micro-batch — the one place every strategy runs the model.
//
// A data-parallel strategy (lab/train/strategy.hpp) decides what happens around the model (buffers, gathers,
// communication); the runner runs it: the embedding, the blocks under activation checkpointing
// (parallel.activation_checkpointing, lab/train/checkpoint.hpp), the head, the weighted loss, then backward of the
// loss times the strategy's factor. A strategy that works unit by unit (the sharded engine gathers a unit's
// parameters before its forward) hands in its groups of model units and a hook before and after each group; a
// pipeline stage (later) runs the units it owns the same way. Model units: 0 = embedding, 1..L = blocks, L+1 = head.
//
//   ModelRunner runner(model, config.parallel);
//   at::Tensor loss = runner.forward_loss(batch, loss_weight);   // weighted, in Phase::forward
//   double value = runner.backward(loss, factor, rank);           // (loss * factor).backward(), in Phase::backward
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "lab/config.hpp"
#include "lab/data.hpp"
#include "lab/model.hpp"
#include "lab/train/checkpoint.hpp"

namespace dtlab {

// Groups of consecutive model units a strategy wants to act between, with its hooks. `before(g)` runs before group
// g's forward, `after(g, output)` after it (the output is the activation leaving the group: a strategy can hook its
// gradient). Each group's forward is its own "forward-compute <name>" span.
struct UnitGroups {
  std::vector<std::string> names;
  std::vector<std::vector<int>> units;  // model units of each group, in model order, covering 0..L+1
  std::function<void(size_t group)> before;
  std::function<void(size_t group, at::Tensor& output)> after;
};

class ModelRunner {
 public:
  ModelRunner() = default;
  ModelRunner(std::shared_ptr<GPT> model, const ParallelConfig& parallel);

  GPT& model() { return *model_; }

  // The model's forward over `batch.inputs` and its loss: loss_sum(logits, targets) * loss_weight, fp32. With
  // `groups`, unit by unit with the hooks between them; without, the whole model in one span.
  at::Tensor forward_loss(const Batch& batch, double loss_weight, const UnitGroups* groups = nullptr);
  // Backward of loss * factor (factor: the strategy's data-parallel size and loss scale), in Phase::backward;
  // `after` runs inside the backward span once autograd returns (a strategy's last in-flight collective).
  // Returns the loss's value. `rank`: for the injected delay after the forward (DTLAB_INJECT_DELAY=after_forward).
  double backward(const at::Tensor& loss, double factor, int rank, const std::function<void()>& after = {});

  // Model unit m on x (0 = embedding of tokens, 1..L = block m-1 under checkpointing, L+1 = head).
  at::Tensor run_unit(int m, const at::Tensor& x);
  int unit_count() const { return static_cast<int>(model_->config().n_layers) + 2; }

 private:
  std::shared_ptr<GPT> model_;
  CheckpointMode checkpointing_ = CheckpointMode::none;
  int64_t checkpoint_every_ = 1;
};

}  // namespace dtlab
