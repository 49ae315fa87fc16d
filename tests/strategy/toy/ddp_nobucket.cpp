// ddp_nobucket.cpp: the toy strategy `ddp_nobucket` (tests only) — DDP without buckets or overlap. Every rank holds
// the whole model; gradients accumulate in each parameter's .grad over micro-steps; finish_gradients() all-reduces
// them one tensor at a time, waiting for each, and divides by the data-parallel size. Added as any strategy is:
// this file, ddp_nobucket_cost.cpp and one line in a catalogue (tests/strategy/toy/catalog.def).
#include <memory>

#include "lab/comm/comm.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"
#include "lab/train/model_runner.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/train/state_pieces.hpp"
#include "lab/train/strategy.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {
namespace {

class DdpNoBucketStrategy final : public Strategy {
 public:
  std::string id() const override { return "ddp_nobucket"; }
  ParallelLayout layout() const override { return {.dp_rank = rank_, .dp_size = world_size_, .dp_comm = comm_}; }

  void wrap(std::shared_ptr<GPT> model, const Config& config, MeshComms& comms) override {
    strategy_spec(id()).check(config);  // refusals (ddp_nobucket_cost.cpp)
    model_ = std::move(model);
    runner_ = ModelRunner(model_, config.parallel);
    comm_ = &comms.data_parallel();  // the data-parallel group: its rank and size are the layout's
    world_size_ = comm_->size();
    rank_ = comm_->rank();
    std::vector<bool> decay;
    for (const auto& p : model_->parameters()) {
      names_.push_back(p.name);
      params_.push_back(*p.tensor);
      decay.push_back(!p.is_norm_or_embedding || config.train.decay_norms_and_embeddings);
    }
    {  // every replica starts from rank 0's parameters
      at::NoGradGuard no_grad;
      for (auto& p : params_) {
        at::Tensor handle = p.detach();
        comm_->broadcast(handle, 0, "ddp_nobucket.broadcast_params").wait();
      }
    }
    MemoryScope grads(MemoryCategory::grads);  // allocated now, so backward accumulates in place
    for (auto& p : params_) p.mutable_grad() = at::zeros_like(p);
    optimizer_ = make_optimizer(config.train, params_, std::move(decay));
  }

  double forward_backward(const Batch& batch, double loss_weight, bool /*is_last_micro*/) override {
    const at::Tensor loss = runner_.forward_loss(batch, loss_weight);
    return runner_.backward(loss, static_cast<double>(world_size_), rank_);  // averaged over the dp ranks below
  }

  void finish_gradients() override {
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor grad = params_[i].grad();
      comm_->all_reduce(grad, "ddp_nobucket.grads." + names_[i]).wait();
      grad.div_(static_cast<double>(world_size_));
    }
  }

  double grad_sum_of_squares() override {
    double total = 0.0;  // replicas hold identical gradients
    for (const auto& p : params_) total += p.grad().pow(2).sum().item<double>();
    return total;
  }

  void scale_gradients(double factor) override {
    for (auto& p : params_) p.grad().mul_(factor);
  }

  void optimizer_step(double lr) override {
    std::vector<at::Tensor> grads;
    for (auto& p : params_) grads.push_back(p.grad());
    optimizer_->step(grads, lr);
  }

  void zero_grad() override {
    for (auto& p : params_) p.grad().zero_();
  }

  StateBytes state_bytes() const override {
    StateBytes bytes;
    for (const auto& p : params_) {
      bytes.params += static_cast<int64_t>(p.nbytes());
      bytes.grads += static_cast<int64_t>(p.grad().nbytes());
    }
    bytes.optimizer = optimizer_->state_bytes();
    return bytes;
  }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < params_.size(); ++i) out.emplace_back(names_[i], params_[i].detach().clone());
    return out;
  }
  // Every replica holds the same state: rank 0 writes one full copy.
  std::vector<StatePiece> state_pieces() override {
    return whole_tensor_pieces(names_, params_, *optimizer_, /*written_here=*/rank_ == 0);
  }
  std::map<std::string, double> state_scalars() const override {
    std::map<std::string, double> scalars;
    add_common_scalars(scalars, *optimizer_, nullptr);
    return scalars;
  }
  void restore_state(const std::map<std::string, double>& scalars) override {
    restore_common_scalars(scalars, *optimizer_, nullptr);
  }

 private:
  std::shared_ptr<GPT> model_;
  Comm* comm_ = nullptr;
  int world_size_ = 1, rank_ = 0;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<Optimizer> optimizer_;
  ModelRunner runner_;
};

}  // namespace

std::unique_ptr<Strategy> make_ddp_nobucket_strategy() { return std::make_unique<DdpNoBucketStrategy>(); }

}  // namespace dtlab
