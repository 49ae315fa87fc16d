// optimizer.hpp: AdamW (decoupled weight decay) and SGD with momentum, over any list of tensors.
//
// Strategies own their optimizer and hand it whatever they update: full parameters (single, DDP),
// or flat shards (FSDP, ZeRO). The arithmetic follows torch.optim's single-tensor path op for op, so
// dtlab and PyTorch agree to rounding:
//   AdamW: p *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
//          p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
//   SGD:   g += wd*p;  buf = g (t=1) | momentum*buf + g;  p -= lr*buf
// Parameters are updated in place under NoGradGuard.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "lab/config.hpp"

namespace dtlab {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // REQUIRES: grads[i] has the shape and dtype of the i-th parameter.
  virtual void step(const std::vector<at::Tensor>& grads, double lr) = 0;
  virtual int64_t state_bytes() const = 0;  // optimizer state only (moments / momentum buffers)
  virtual int64_t steps_taken() const = 0;

  // Checkpoints: the kinds of state it keeps per parameter ("exp_avg", "exp_avg_sq" | "momentum" | none), one
  // tensor of each kind per parameter in construction order (live; allocated here if made lazily), and the step
  // count that restoring sets.
  virtual std::vector<std::string> state_kinds() const = 0;
  virtual at::Tensor state(const std::string& kind, size_t index) = 0;
  virtual void set_steps_taken(int64_t steps) = 0;
};

// `params` are updated in place; `weight_decay_mask[i]` says whether params[i] gets weight decay.
// train.optimizer: adamw | sgd.
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& train, std::vector<at::Tensor> params,
                                          std::vector<bool> weight_decay_mask);

}  // namespace dtlab
