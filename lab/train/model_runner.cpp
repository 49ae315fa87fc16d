// model_runner.cpp: one micro-batch's forward, loss and backward (see model_runner.hpp).
#include "lab/train/model_runner.hpp"

#include "lab/instrument/fault_injection.hpp"
#include "lab/instrument/step_profiler.hpp"

namespace dtlab {

ModelRunner::ModelRunner(std::shared_ptr<GPT> model, const ParallelConfig& parallel)
    : model_(std::move(model)),
      checkpointing_(checkpoint_mode(parallel.activation_checkpointing)),
      checkpoint_every_(parallel.checkpoint_every) {}

at::Tensor ModelRunner::run_unit(int m, const at::Tensor& x) {
  const int L = static_cast<int>(model_->config().n_layers);
  if (m == 0) return model_->embed(x);
  if (m == L + 1) return model_->head(x);
  return run_block(*model_, m - 1, x, checkpointing_, checkpoint_every_);
}

at::Tensor ModelRunner::forward_loss(const Batch& batch, double loss_weight, const UnitGroups* groups) {
  ScopedPhase forward(Phase::forward, "forward-compute");
  at::Tensor x = batch.inputs;
  if (groups == nullptr) {
    for (int m = 0; m < unit_count(); ++m) x = run_unit(m, x);
  } else {
    for (size_t g = 0; g < groups->units.size(); ++g) {
      if (groups->before) groups->before(g);
      {
        ScopedPhase group_forward(Phase::forward, "forward-compute " + groups->names[g]);
        for (int m : groups->units[g]) x = run_unit(m, x);
      }
      if (groups->after) groups->after(g, x);
    }
  }
  return model_->loss(x, batch.targets) * loss_weight;
}

double ModelRunner::backward(const at::Tensor& loss, double factor, int rank, const std::function<void()>& after) {
  inject_delay("after_forward", rank);
  ScopedPhase backward(Phase::backward, "backward-compute");
  (loss * factor).backward();
  if (after) after();
  return loss.item<double>();
}

}  // namespace dtlab
