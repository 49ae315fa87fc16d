// single.cpp: the `single` strategy — one process holds everything; the reference every other
// strategy is compared with. Gradients accumulate in each parameter's .grad over micro-steps.
// With precision.param_dtype bf16/fp16 it is the emulated mixed-precision reference: the model computes
// with 16-bit copies of fp32 master parameters (refreshed before each step), gradients are cast to fp32
// and the optimizer updates the masters. With precision.loss_scale=dynamic it scales the loss like the
// sharded strategies (lab/train/loss_scaler.hpp), so it is their fp16 reference too.
#include <cmath>
#include <limits>
#include <memory>

#include "lab/device.hpp"
#include "lab/dtype_torch.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"
#include "lab/train/loss_scaler.hpp"
#include "lab/train/model_runner.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/train/state_pieces.hpp"
#include "lab/train/strategy.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {

namespace {

class SingleStrategy final : public Strategy {
 public:
  std::string id() const override { return "single"; }
  ParallelLayout layout() const override { return {}; }  // one process: data-parallel rank 0 of 1

  void wrap(std::shared_ptr<GPT> model, const Config& config, MeshComms& comms) override {
    strategy_spec(id()).check(config);  // refusals (strategies/single_cost.cpp)
    if (comms.world().world_size() != config.world_size)
      throw std::logic_error("single: the world has " + std::to_string(comms.world().world_size()) +
                             " ranks, the config says world_size=" + std::to_string(config.world_size));
    scaler_ = LossScaler(config.precision);
    model_ = std::move(model);
    runner_ = ModelRunner(model_, config.parallel);
    std::vector<at::Tensor> params;
    std::vector<bool> decay;
    for (const auto& p : model_->parameters()) {
      params.push_back(*p.tensor);
      decay.push_back(!p.is_norm_or_embedding || config.train.decay_norms_and_embeddings);
    }
    params_ = params;
    compute_dtype_ = scalar_type_named(config.precision.param_dtype, "precision.param_dtype");
    if (compute_dtype_ != at::kFloat) {
      // params_ stay the fp32 masters; the model computes with 16-bit leaf copies bound in their place.
      MemoryScope held(MemoryCategory::params);
      for (const auto& p : model_->parameters()) {
        at::Tensor copy = p.tensor->detach().to(compute_dtype_).requires_grad_(true);
        compute_.push_back(copy);
        *p.tensor = copy;
      }
      MemoryScope grads(MemoryCategory::grads);
      for (const auto& p : params_) master_grads_.push_back(at::zeros_like(p));
    }
    // Gradients exist from the start and backward accumulates into them in place (adding to zero is exact), so they
    // are allocated here as gradients rather than by autograd during backward.
    MemoryScope grads(MemoryCategory::grads);
    for (auto& p : compute_.empty() ? params_ : compute_) p.mutable_grad() = at::zeros_like(p);
    optimizer_ = make_optimizer(config.train, std::move(params), std::move(decay));
  }

  double forward_backward(const Batch& batch, double loss_weight, bool /*is_last_micro*/) override {
    if (!compute_.empty() && !compute_fresh_) {  // masters -> 16-bit compute copies, once per step
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < compute_.size(); ++i) compute_[i].copy_(params_[i]);
      compute_fresh_ = true;
    }
    const at::Tensor loss = runner_.forward_loss(batch, loss_weight);
    return runner_.backward(loss, scaler_.scale(), /*rank=*/0);
  }

  void finish_gradients() override {
    for (size_t i = 0; i < compute_.size(); ++i)  // 16-bit gradients -> fp32 master gradients
      master_grads_[i].copy_(compute_[i].grad().defined() ? compute_[i].grad() : at::zeros_like(compute_[i]));
    if (!scaler_.enabled()) return;
    bool nonfinite = false;
    for (auto& g : grads())
      if (g.defined()) {
        g.div_(scaler_.scale());
        nonfinite = nonfinite || !g.isfinite().all().item<bool>();
      }
    scaler_.finish_step(nonfinite);
  }

  double loss_scale() const override { return scaler_.used_scale(); }
  bool step_skipped() const override { return scaler_.skipped(); }

  std::map<std::string, std::string> dtype_audit() const override {
    const std::string compute = c10::getDtypeNames(compute_dtype_).first;
    return {{"params", compute}, {"master", "float32"}, {"grads", compute}, {"optimizer_state", "float32"}};
  }

  double grad_sum_of_squares() override {
    if (scaler_.skipped()) return std::numeric_limits<double>::infinity();  // reported; the step is skipped
    return sum_of_squares(grads());  // per tensor, in model order (one host sync on a GPU)
  }

  void scale_gradients(double factor) override {
    for (auto& g : grads())
      if (g.defined()) g.mul_(factor);
  }

  void optimizer_step(double lr) override {
    if (scaler_.skipped()) return;  // no update, optimizer state untouched; the scaler halved the scale
    std::vector<at::Tensor> step_grads;
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor g = grads()[i];
      step_grads.push_back(g.defined() ? g : at::zeros_like(params_[i]));
    }
    optimizer_->step(step_grads, lr);
    compute_fresh_ = false;
  }

  void zero_grad() override {
    for (auto& p : compute_.empty() ? params_ : compute_)
      if (p.grad().defined()) p.mutable_grad().zero_();
  }

  StateBytes state_bytes() const override {
    StateBytes bytes;
    for (const auto& p : params_) {
      bytes.params += static_cast<int64_t>(p.nbytes());
      bytes.grads += static_cast<int64_t>(p.nbytes());  // one gradient per parameter once backward ran
    }
    for (const auto& c : compute_) {  // mixed precision: 16-bit compute copies and their gradients
      bytes.params += static_cast<int64_t>(c.nbytes());
      bytes.grads += static_cast<int64_t>(c.nbytes());
    }
    bytes.optimizer = optimizer_->state_bytes();
    return bytes;
  }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    const auto refs = model_->parameters();
    for (size_t i = 0; i < refs.size(); ++i) out.emplace_back(refs[i].name, params_[i].detach().clone());
    return out;
  }

  // The fp32 masters and the optimizer's state; the 16-bit compute copies follow them at the next forward.
  std::vector<StatePiece> state_pieces() override {
    std::vector<std::string> names;
    for (const auto& p : model_->parameters()) names.push_back(p.name);
    return whole_tensor_pieces(names, params_, *optimizer_, /*written_here=*/true);
  }
  std::map<std::string, double> state_scalars() const override {
    std::map<std::string, double> scalars;
    add_common_scalars(scalars, *optimizer_, &scaler_);
    return scalars;
  }
  void restore_state(const std::map<std::string, double>& scalars) override {
    restore_common_scalars(scalars, *optimizer_, &scaler_);
    compute_fresh_ = false;
  }

 private:
  std::shared_ptr<GPT> model_;
  std::vector<at::Tensor> params_;
  // The gradients the optimizer uses: the fp32 masters' (mixed precision) or the parameters' own.
  std::vector<at::Tensor> grads() {
    if (!compute_.empty()) return master_grads_;
    std::vector<at::Tensor> out;
    for (auto& p : params_) out.push_back(p.grad());
    return out;
  }

  std::unique_ptr<Optimizer> optimizer_;
  ModelRunner runner_;
  at::ScalarType compute_dtype_ = at::kFloat;
  std::vector<at::Tensor> compute_;       // 16-bit compute copies bound into the model (mixed precision)
  std::vector<at::Tensor> master_grads_;  // their gradients in fp32
  bool compute_fresh_ = false;
  LossScaler scaler_{PrecisionConfig{}};
};

}  // namespace

std::unique_ptr<Strategy> make_single_strategy() { return std::make_unique<SingleStrategy>(); }

}  // namespace dtlab
