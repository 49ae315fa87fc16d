// single.cpp: the `single` strategy — one process holds everything; the reference every other
// strategy is compared with. Gradients accumulate in each parameter's .grad over micro-steps.
#include <cmath>
#include <memory>

#include "lab/train/checkpoint.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/train/strategy.hpp"

namespace dtlab {
namespace {

class SingleStrategy final : public Strategy {
 public:
  std::string id() const override { return "single"; }

  void wrap(std::shared_ptr<GPT> model, const Config& config, World& world) override {
    if (world.world_size() != 1)
      throw std::invalid_argument("parallel.strategy=single runs one process, but world_size=" +
                                  std::to_string(world.world_size()) + "; use ddp or an fsdp strategy");
    if (config.parallel.offload)
      throw std::invalid_argument("parallel.strategy=single does not combine with parallel.offload=true: offload "
                                  "moves sharded state to the host; use an fsdp strategy or zero1 with offload");
    if (config.precision.param_dtype != "fp32")
      throw std::invalid_argument("parallel.strategy=single with precision.param_dtype=" + config.precision.param_dtype +
                                  ": mixed precision is not built yet; use fp32");
    checkpointing_ = checkpoint_mode(config.parallel.activation_checkpointing);
    model_ = std::move(model);
    std::vector<at::Tensor> params;
    std::vector<bool> decay;
    for (const auto& p : model_->parameters()) {
      params.push_back(*p.tensor);
      decay.push_back(!p.is_norm_or_embedding || config.train.decay_norms_and_embeddings);
    }
    params_ = params;
    optimizer_ = make_optimizer(config.train, std::move(params), std::move(decay));
  }

  double forward_backward(const Batch& batch, double loss_weight, bool /*is_last_micro*/) override {
    at::Tensor loss = GPT::loss_sum(forward_with_checkpointing(*model_, batch.inputs, checkpointing_), batch.targets) * loss_weight;
    loss.backward();
    return loss.item<double>();
  }

  void finish_gradients() override {}

  double grad_sum_of_squares() override {
    double total = 0.0;
    for (const auto& p : params_)
      if (p.grad().defined()) total += p.grad().pow(2).sum().item<double>();
    return total;
  }

  void scale_gradients(double factor) override {
    for (auto& p : params_)
      if (p.grad().defined()) p.mutable_grad().mul_(factor);
  }

  void optimizer_step(double lr) override {
    std::vector<at::Tensor> grads;
    for (auto& p : params_) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
    optimizer_->step(grads, lr);
  }

  void zero_grad() override {
    for (auto& p : params_)
      if (p.grad().defined()) p.mutable_grad().zero_();
  }

  StateBytes state_bytes() const override {
    StateBytes bytes;
    for (const auto& p : params_) {
      bytes.params += static_cast<int64_t>(p.nbytes());
      bytes.grads += static_cast<int64_t>(p.nbytes());  // one gradient per parameter once backward ran
    }
    bytes.optimizer = optimizer_->state_bytes();
    return bytes;
  }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& p : model_->parameters()) out.emplace_back(p.name, p.tensor->detach().clone());
    return out;
  }

 private:
  std::shared_ptr<GPT> model_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<Optimizer> optimizer_;
  CheckpointMode checkpointing_ = CheckpointMode::none;
};

}  // namespace

std::unique_ptr<Strategy> make_single_strategy() { return std::make_unique<SingleStrategy>(); }

}  // namespace dtlab
