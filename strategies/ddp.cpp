// ddp.cpp: the `ddp` strategy — every rank holds the whole model; gradients are averaged across ranks
// by bucketed all-reduces that overlap the rest of backward.
//
// wrap:      parameters broadcast from rank 0; gradient buckets in reverse parameter order
//            (train.parallel.bucket_cap_mb, first bucket 1 MiB, see ddp_buckets.hpp); every .grad is a
//            view into its bucket's flat buffer, so accumulation writes the bucket directly (no copies).
// backward:  a post-accumulate-grad hook per parameter counts the bucket's ready gradients; when the
//            last one lands (on the last micro-step only), that bucket's all-reduce starts
//            asynchronously. Buckets start strictly in index order, so every rank issues the same
//            collectives in the same order.
// finish:    wait for every bucket, divide by the data-parallel size. The loss is scaled by it, so the
//            averaged gradient is the gradient of the global mean loss. Every collective runs on the mesh's
//            data-parallel group (lab/dist/mesh_comms.hpp): the world while pp = cp = tp = 1.
// reduce_dtype (precision.reduce_dtype): bf16/fp16 communication of fp32 gradients through a
//            temporary buffer per bucket.
#include <cmath>
#include <memory>
#include <stdexcept>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "lab/comm/comm.hpp"
#include "lab/comm/hierarchical.hpp"
#include "lab/device.hpp"
#include "lab/dtype_torch.hpp"
#include "lab/instrument/fault_injection.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"
#include "lab/train/model_runner.hpp"
#include "lab/train/optimizer.hpp"
#include "lab/train/state_pieces.hpp"
#include "lab/train/strategy.hpp"
#include "strategies/catalog.hpp"
#include "strategies/ddp_buckets.hpp"

namespace dtlab {

namespace {

class DdpStrategy;

// Forwards "gradient of parameter i is accumulated" to the strategy.
struct GradReadyHook final : torch::autograd::PostAccumulateGradHook {
  GradReadyHook(DdpStrategy* s, size_t i) : strategy(s), index(i) {}
  void operator()(const torch::autograd::Variable&) override;
  DdpStrategy* strategy;
  size_t index;
};

struct Bucket {
  std::vector<size_t> params;  // indices into params_
  at::Tensor buffer;           // flat fp32 gradients; .grad of each param is a view into it
  at::Tensor wire;             // reduce-dtype copy (undefined when reducing in fp32)
  size_t ready = 0;
  CommHandle handle;
  bool launched = false;
};

class DdpStrategy final : public Strategy {
 public:
  std::string id() const override { return "ddp"; }
  // Every rank of the data-parallel group is a replica.
  ParallelLayout layout() const override { return {.dp_rank = dp_rank_, .dp_size = dp_size_, .dp_comm = comm_}; }

  void wrap(std::shared_ptr<GPT> model, const Config& config, MeshComms& comms) override {
    strategy_spec(id()).check(config);  // refusals (strategies/ddp_cost.cpp)
    model_ = std::move(model);
    runner_ = ModelRunner(model_, config.parallel);
    rank_ = comms.rank();
    dp_size_ = comms.size_of(kDataParallelDims);
    dp_rank_ = comms.index_in(kDataParallelDims);
    two_level_ = two_level_for(config.parallel.collectives, comms);  // refusals first, before any communicator
    comm_ = &comms.data_parallel();
    reduce_dtype_ = scalar_type_named(config.precision.reduce_dtype, "precision.reduce_dtype");

    std::vector<bool> decay;
    for (const auto& p : model_->parameters()) {
      params_.push_back(*p.tensor);
      counted_in_norm_.push_back(p.counted_in_norm);
      decay.push_back(!p.is_norm_or_embedding || config.train.decay_norms_and_embeddings);
    }
    broadcast_parameters();

    std::vector<int64_t> grad_bytes;
    for (const auto& p : params_) grad_bytes.push_back(static_cast<int64_t>(p.nbytes()));
    const auto cap = static_cast<int64_t>(config.parallel.bucket_cap_mb * 1024.0 * 1024.0);
    const BucketLayout layout = assign_buckets(grad_bytes, cap, kFirstBucketCapBytes);
    bucket_of_.assign(params_.size(), 0);
    for (size_t b = 0; b < layout.buckets.size(); ++b) {
      Bucket bucket;
      int64_t numel = 0;
      for (int i : layout.buckets[b]) numel += params_[static_cast<size_t>(i)].numel();
      {
        MemoryScope grads(MemoryCategory::grads);
        bucket.buffer = at::zeros({numel}, params_[0].options().requires_grad(false));
      }
      MemoryScope buffers(MemoryCategory::buffers);
      if (reduce_dtype_ != at::kFloat) bucket.wire = at::empty({numel}, bucket.buffer.options().dtype(reduce_dtype_));
      int64_t offset = 0;
      for (int i : layout.buckets[b]) {
        at::Tensor& p = params_[static_cast<size_t>(i)];
        p.mutable_grad() = bucket.buffer.narrow(0, offset, p.numel()).view(p.sizes());
        offset += p.numel();
        bucket.params.push_back(static_cast<size_t>(i));
        bucket_of_[static_cast<size_t>(i)] = b;
      }
      buckets_.push_back(std::move(bucket));
    }
    for (size_t i = 0; i < params_.size(); ++i)
      torch::autograd::impl::set_post_acc_grad_hooks(params_[i], std::make_unique<GradReadyHook>(this, i));
    optimizer_ = make_optimizer(config.train, params_, std::move(decay));
  }

  double forward_backward(const Batch& batch, double loss_weight, bool is_last_micro) override {
    sync_ = is_last_micro;  // no communication on the non-final micro-steps of accumulation
    for (auto& b : buckets_) b.ready = 0;
    const at::Tensor loss = runner_.forward_loss(batch, loss_weight);
    return runner_.backward(loss, static_cast<double>(dp_size_), rank_);  // the mean over dp ranks: finish_gradients
  }

  // The pipeline's backwards each reach only some parameters; the buckets all go in finish_gradients.
  std::optional<PipelineAccess> pipeline_access() override {
    sync_ = false;
    PipelineAccess access;
    access.model = model_;
    access.loss_factor = static_cast<double>(dp_size_);
    return access;
  }

  void on_grad_ready(size_t index) {
    if (!sync_) return;
    Bucket& bucket = buckets_[bucket_of_[index]];
    ++bucket.ready;
    launch_ready_buckets();
  }

  void finish_gradients() override {
    for (size_t b = next_launch_; b < buckets_.size(); ++b) launch(b);  // gradients that never arrived count as 0
    next_launch_ = buckets_.size();
    for (auto& bucket : buckets_) {
      bucket.handle.wait();
      if (bucket.wire.defined()) bucket.buffer.copy_(bucket.wire);
      if (!mutation("drop_world_factor")) bucket.buffer.div_(static_cast<double>(layout().dp_size));
      bucket.launched = false;
    }
    next_launch_ = 0;
    ++steps_seen_;
  }

  double grad_sum_of_squares() override {
    // Replicas hold identical gradients: no communication needed. Summed per parameter in model order
    // (as `single` does), so the result does not depend on the bucket layout.
    std::vector<at::Tensor> grads;  // a parameter another model-parallel rank counts is left out (undefined)
    for (size_t i = 0; i < params_.size(); ++i) grads.push_back(counted_in_norm_[i] ? params_[i].grad() : at::Tensor());
    return sum_of_squares(grads);
  }

  void scale_gradients(double factor) override {
    for (auto& b : buckets_) b.buffer.mul_(factor);
  }

  void optimizer_step(double lr) override {
    std::vector<at::Tensor> grads;
    for (auto& p : params_) grads.push_back(p.grad());
    optimizer_->step(grads, lr);
  }

  void zero_grad() override {
    for (auto& b : buckets_) b.buffer.zero_();
  }

  StateBytes state_bytes() const override {
    StateBytes bytes;
    for (const auto& p : params_) bytes.params += static_cast<int64_t>(p.nbytes());
    for (const auto& b : buckets_) {
      bytes.grads += static_cast<int64_t>(b.buffer.nbytes());
      if (b.wire.defined()) bytes.buffers += static_cast<int64_t>(b.wire.nbytes());
    }
    bytes.optimizer = optimizer_->state_bytes();
    return bytes;
  }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& p : model_->parameters()) out.emplace_back(p.name, p.tensor->detach().clone());
    return out;
  }
  // Every replica holds the same state: rank 0 writes one full copy.
  std::vector<StatePiece> state_pieces() override {
    std::vector<std::string> names;
    for (const auto& p : model_->parameters()) names.push_back(p.name);
    return whole_tensor_pieces(names, params_, *optimizer_, /*written_here=*/dp_rank_ == 0);
  }
  std::map<std::string, double> state_scalars() const override {
    std::map<std::string, double> scalars{{kStepsSeenScalar, static_cast<double>(steps_seen_)}};
    add_common_scalars(scalars, *optimizer_, nullptr);
    return scalars;
  }
  void restore_state(const std::map<std::string, double>& scalars) override {
    restore_common_scalars(scalars, *optimizer_, nullptr);
    if (const auto it = scalars.find(kStepsSeenScalar); it != scalars.end()) steps_seen_ = std::llround(it->second);
  }

 private:
  // Every replica starts from rank 0's parameters: one in-place broadcast per tensor, all in flight at
  // once (no flat copy that would outlive the call).
  void broadcast_parameters() {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> handles;
    std::vector<CommHandle> pending;
    for (const auto& p : params_) handles.push_back(p.detach());
    for (auto& h : handles) pending.push_back(comm_->broadcast(h, 0, "ddp.broadcast_params"));
    for (auto& h : pending) h.wait();
  }

  void launch_ready_buckets() {
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].ready == buckets_[next_launch_].params.size())
      launch(next_launch_++);
  }

  void launch(size_t b) {
    Bucket& bucket = buckets_[b];
    if (bucket.launched) return;
    bucket.launched = true;
    const std::string tag = "ddp.bucket." + std::to_string(b);
    if (b == 0 && inject_nonfinite(steps_seen_ + 1, rank_)) bucket.buffer[0] = nonfinite_injection_value();
    if (b == 0 && mutation("skip_bucket")) return;  // the deliberate bug: this bucket's gradients stay local
    at::Tensor& sent = bucket.wire.defined() ? bucket.wire : bucket.buffer;
    if (bucket.wire.defined()) bucket.wire.copy_(bucket.buffer);
    bucket.handle = two_level_ ? two_level_->all_reduce(sent, tag) : comm_->all_reduce(sent, tag);
  }

  std::shared_ptr<GPT> model_;
  // parallel.collectives: the hierarchical all-reduce when asked for, or (auto) when the job spans nodes with more
  // than one rank on each; null = one flat all-reduce over the world.
  // The two levels are the world's nodes, so the data-parallel group must be the world.
  static std::unique_ptr<HierarchicalComm> two_level_for(const std::string& collectives, MeshComms& comms) {
    World& world = comms.world();
    const int k = world.local_world_size(), w = world.world_size();
    if (collectives == "hierarchical" && comms.size_of(kDataParallelDims) != w)
      throw std::invalid_argument(
          "ddp: parallel.collectives=hierarchical needs the data-parallel group to be the "
          "world (mesh " +
          comms.mesh().describe() + "); use flat or auto");
    if (comms.size_of(kDataParallelDims) != w) return nullptr;
    if (collectives == "hierarchical" && !job_spans_nodes(w, k))
      throw std::invalid_argument("ddp: parallel.collectives=hierarchical needs a job across nodes (LOCAL_WORLD_SIZE " +
                                  std::to_string(k) + " < WORLD_SIZE " + std::to_string(w) +
                                  ", e.g. dtlab launch --nodes 2); use flat or auto");
    if (!uses_hierarchical_all_reduce(collectives, w, k)) return nullptr;
    return std::make_unique<HierarchicalComm>(world, k);
  }

  Comm* comm_ = nullptr;
  std::unique_ptr<HierarchicalComm> two_level_;
  int rank_ = 0, dp_size_ = 1, dp_rank_ = 0;  // rank_: in the world (fault injection); dp_: in the dp group
  at::ScalarType reduce_dtype_ = at::kFloat;
  std::vector<at::Tensor> params_;
  std::vector<bool> counted_in_norm_;  // ParamRef::counted_in_norm, per parameter
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  size_t next_launch_ = 0;
  int64_t steps_seen_ = 0;
  bool sync_ = true;
  std::unique_ptr<Optimizer> optimizer_;
  ModelRunner runner_;
};

void GradReadyHook::operator()(const torch::autograd::Variable&) { strategy->on_grad_ready(index); }

}  // namespace

std::unique_ptr<Strategy> make_ddp_strategy() { return std::make_unique<DdpStrategy>(); }

}  // namespace dtlab
