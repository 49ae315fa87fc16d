// fsdp_engine.cpp: flat sharded units, gathers, reduce-scatters and the sharded optimizer for the
// fsdp_* strategies and zero1 (schedule per mode in fsdp_engine.hpp).
#include "strategies/fsdp_engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "kernels/stochastic_round.hpp"
#include "lab/comm/comm.hpp"
#include "lab/dist/fault_injection.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"
#include "lab/train/checkpoint.hpp"
#include "lab/train/loss_scaler.hpp"
#include "lab/train/optimizer.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {

at::ScalarType dtype_from_name(const std::string& name);  // strategies/ddp.cpp

namespace {

// Storage of `t` (and every view of it) released / re-allocated in place: views stay valid objects
// and see the new bytes once they are written.
void release_storage(const at::Tensor& t) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (impl->nbytes() == 0) return;
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  impl->set_nbytes(0);
}

// Every storage refilled this way is transient working memory (gathered units, their gradients, the bf16 master's
// fp32 scratch): counted as buffers.
void ensure_storage(const at::Tensor& t, int64_t nbytes) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (static_cast<int64_t>(impl->nbytes()) == nbytes) return;
  MemoryScope buffers(MemoryCategory::buffers);
  impl->set_data_ptr_noswap(impl->allocator()->allocate(static_cast<size_t>(nbytes)));
  impl->set_nbytes(static_cast<size_t>(nbytes));
}

bool has_storage(const at::Tensor& t) { return t.storage().nbytes() > 0; }

// A tensor over the same storage with its own version counter (collective writes into gathered
// parameters must not invalidate what autograd saved from them).
at::Tensor storage_alias(const at::Tensor& t) {
  at::Tensor alias = at::empty({0}, t.options());
  alias.set_(t.storage(), 0, {t.numel()}, {1});
  return alias;
}

struct FlatUnit {
  std::string name;
  std::vector<int> model_units;  // indices into GPT::units(): 0 embedding, 1..L blocks, L+1 head
  std::vector<ParamRef> params;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;
  std::vector<bool> decay;
  int64_t numel = 0, padded = 0, shard_numel = 0;
  at::Tensor shard;           // this rank's fp32 master parameters [shard_numel] (host buffer when offloading)
  at::Tensor shard_grad;      // their gradient [shard_numel] (host buffer when offloading)
  at::Tensor compute_shard;   // offload: compute-side copy of `shard` that gathers read
  at::Tensor full;            // gathered parameters [padded]; the model computes with views of it
  at::Tensor full_writer;     // storage alias of `full` for collective writes
  at::Tensor full_grad;       // gradients of the gathered parameters [padded]
  at::Tensor reduce_in;       // reduce-dtype copy of full_grad when it differs from the compute dtype
  at::Tensor reduce_out;      // reduce-scatter output [shard_numel], reduce dtype
  at::Tensor master_scratch;  // master_dtype=bf16: fp32 copy of the shard the optimizer steps on
  std::vector<at::Tensor> views;
  bool params_ready = false;
  bool gather_pending = false;
  CommHandle gather;
  CommHandle grad_reduce;  // no_shard: the all-reduce of the last micro-step
  size_t grads_ready = 0;
};

class ShardedStrategy;

struct UnitGradHook final : torch::autograd::PostAccumulateGradHook {
  UnitGradHook(ShardedStrategy* s, size_t u) : strategy(s), unit(u) {}
  void operator()(const torch::autograd::Variable&) override;
  ShardedStrategy* strategy;
  size_t unit;
};

class ShardedStrategy final : public Strategy {
 public:
  ShardedStrategy(ShardingMode mode, std::string id) : mode_(mode), id_(std::move(id)) {}
  std::string id() const override { return id_; }
  // Every rank sees its own data: shard groups and replica groups (hybrid) both split the model's state, not the
  // batch, so the data-parallel group is the world.
  ParallelLayout layout() const override { return {.dp_rank = rank_, .dp_size = world_size_}; }

  void wrap(std::shared_ptr<GPT> model, const Config& config, World& world) override {
    compute_dtype_ = dtype_from_name(config.precision.param_dtype);
    reduce_dtype_ = dtype_from_name(config.precision.reduce_dtype);
    master_dtype_ = dtype_from_name(config.precision.master_dtype);
    scaler_ = LossScaler(config.precision);
    strategy_spec(id_).check(config);  // refusals (check_sharded in strategies/sharded_plan.cpp)
    model_ = std::move(model);
    config_ = config;
    world_size_ = world.world_size();
    rank_ = world.rank();
    offload_ = config.parallel.offload;
    prefetch_ = config.parallel.prefetch;
    checkpointing_ = checkpoint_mode(config.parallel.activation_checkpointing);
    algorithm_ = config.parallel.reduce_scatter == "backend" ? CommAlgorithm::backend : CommAlgorithm::ring;
    setup_groups(world);
    build_units();
    build_optimizer();
    for (auto& unit : units_)  // the optimizer's views of the scratch exist now: hold its bytes only during steps
      if (unit.master_scratch.defined()) release_storage(unit.master_scratch);
  }

  double forward_backward(const Batch& batch, double loss_weight, bool is_last_micro) override {
    is_last_micro_ = is_last_micro;
    const size_t n = units_.size();
    at::Tensor x = batch.inputs;
    at::Tensor loss;
    {
      ScopedPhase forward(Phase::forward, "forward-compute");
      for (size_t u = 0; u < n; ++u) {
        FlatUnit& unit = units_[u];
        ensure_gathered(unit);
        if (prefetch_ && u + 1 < n) start_gather(units_[u + 1]);
        {
          ScopedPhase unit_forward(Phase::forward, "forward-compute " + unit.name);
          for (int m : unit.model_units) x = run_model_unit(m, x);
        }
        x.register_hook([this, u](const at::Tensor&) { before_unit_backward(u); });
        if (frees_after_forward() && u + 1 < n) release_params(unit);  // the last unit is needed right away
      }
      loss = GPT::loss_sum(x, batch.targets) * loss_weight;
    }
    inject_delay("after_forward", rank_);
    ScopedPhase backward(Phase::backward, "backward-compute");
    (loss * (static_cast<double>(layout().dp_size) * scaler_.scale())).backward();
    return loss.item<double>();
  }

  // Pre-backward of unit u: its parameters gathered, gradient buffer ready, the next one prefetched.
  void before_unit_backward(size_t u) {
    FlatUnit& unit = units_[u];
    ensure_gathered(unit);
    if (!has_storage(unit.full_grad)) {
      ensure_storage(unit.full_grad, unit.padded * static_cast<int64_t>(unit.full_grad.element_size()));
      unit.full_grad.zero_();
    }
    if (prefetch_ && u > 0) start_gather(units_[u - 1]);
  }

  // Post-backward of unit u: every parameter's gradient has been accumulated.
  void on_grad_ready(size_t u) {
    FlatUnit& unit = units_[u];
    if (++unit.grads_ready < unit.params.size()) return;
    unit.grads_ready = 0;
    switch (mode_) {
      case ShardingMode::full_shard:
      case ShardingMode::shard_grad_op:
      case ShardingMode::hybrid:
        wait_pending_gathers();  // one collective stream: finish prefetches before the ring's send/recv
        reduce_scatter_into(unit, /*accumulate=*/true);
        unit.full_grad.zero_();
        release_storage(unit.full_grad);
        release_params(unit);
        break;
      case ShardingMode::no_shard:
        if (is_last_micro_) {
          at::Tensor wire = reduce_input(unit);
          unit.grad_reduce = replica_comm_->all_reduce(wire, "fsdp.grads." + unit.name);
        }
        break;
      case ShardingMode::zero1:
        if (is_last_micro_) {
          wait_pending_gathers();
          reduce_scatter_into(unit, /*accumulate=*/false);
        }
        break;
    }
  }

  void finish_gradients() override {
    wait_pending_gathers();
    ++steps_seen_;
    for (auto& unit : units_) {
      if (mode_ == ShardingMode::no_shard) {
        unit.grad_reduce.wait();
        const at::Tensor& reduced = unit.reduce_in.defined() ? unit.reduce_in : unit.full_grad;  // all-reduced in place
        if (!unit.shard_grad.is_same(reduced)) unit.shard_grad.copy_(reduced);
      }
      if (mode_ == ShardingMode::hybrid && replica_comm_) {
        // Across replicas in the reduce dtype, like the reduce-scatter inside the group.
        at::Tensor wire = reduce_dtype_ == at::kFloat ? unit.shard_grad : unit.shard_grad.to(reduce_dtype_);
        replica_comm_->all_reduce(wire, "fsdp.replicas." + unit.name).wait();
        if (!wire.is_same(unit.shard_grad)) unit.shard_grad.copy_(wire);
      }
      unit.shard_grad.div_(mean_divisor() * scaler_.scale());
    }
    if (inject_nonfinite(steps_seen_, rank_) && !units_.empty()) units_[0].shard_grad[0] = nonfinite_injection_value();
    double any_bad = 0;
    if (scaler_.enabled()) {  // every rank learns whether any rank saw inf/nan, and all skip together
      double local_bad = 0;
      for (const auto& unit : units_) local_bad += unit.shard_grad.isfinite().all().item<bool>() ? 0.0 : 1.0;
      at::Tensor flag = at::full({1}, local_bad, at::kDouble);
      (shard_comm_ ? shard_comm_ : replica_comm_)->all_reduce(flag, "loss_scale.found_inf").wait();
      if (replica_comm_ && shard_comm_ && replica_comm_ != shard_comm_)
        replica_comm_->all_reduce(flag, "loss_scale.found_inf").wait();
      any_bad = flag.item<double>();
    }
    scaler_.finish_step(any_bad > 0);
  }

  double grad_sum_of_squares() override {
    if (scaler_.skipped()) return std::numeric_limits<double>::infinity();  // reported; the step is skipped anyway
    double local = 0.0;
    for (const auto& unit : units_) local += unit.shard_grad.pow(2).sum().item<double>();
    if (mode_ == ShardingMode::no_shard) return local;  // every rank holds every gradient
    at::Tensor t = at::full({1}, local, at::kDouble);
    shard_comm_->all_reduce(t, "grad_norm").wait();
    return t.item<double>();
  }

  void scale_gradients(double factor) override {
    for (auto& unit : units_) unit.shard_grad.mul_(factor);
  }

  void optimizer_step(double lr) override {
    if (scaler_.skipped()) return;      // no update, optimizer state untouched; the scaler halved the scale
    if (master_dtype_ != at::kFloat) {  // step in fp32 on a scratch copy, round back to the bf16 master
      for (auto& unit : units_) {
        ensure_storage(unit.master_scratch, unit.shard_numel * 4);
        unit.master_scratch.copy_(unit.shard);
      }
    }
    optimizer_->step(optimizer_grads_, lr);
    if (master_dtype_ != at::kFloat) {
      for (size_t u = 0; u < units_.size(); ++u) {
        FlatUnit& unit = units_[u];
        const uint64_t seed =
            (static_cast<uint64_t>(steps_seen_) << 20) ^ (static_cast<uint64_t>(u) << 8) ^ static_cast<uint64_t>(rank_);
        if (config_.precision.stochastic_rounding) {
          kernels::stochastic_round_to_bf16_cpu(unit.master_scratch.data_ptr<float>(),
                                                reinterpret_cast<uint16_t*>(unit.shard.data_ptr()),
                                                static_cast<size_t>(unit.shard_numel), seed);
        } else {
          unit.shard.copy_(unit.master_scratch);
        }
        release_storage(unit.master_scratch);
      }
    }
    for (auto& unit : units_) {
      if (mode_ == ShardingMode::zero1) {
        MemoryScope buffers(MemoryCategory::buffers);
        at::Tensor source = (separate_compute_copy() ? unit.compute_shard.copy_(unit.shard) : unit.shard).clone();
        shard_comm_->all_gather(unit.full_writer, source, CommAlgorithm::backend, "zero1.params." + unit.name).wait();
      } else if (mode_ == ShardingMode::no_shard && separate_compute_copy()) {
        unit.params_ready = false;  // the master changed: copy (and cast) again at the next gather
      }
    }
  }

  void zero_grad() override {
    for (auto& unit : units_) {
      unit.shard_grad.zero_();
      if (has_storage(unit.full_grad)) unit.full_grad.zero_();
      unit.grads_ready = 0;
    }
  }

  // Exact bytes per rank by category (padding included). params: the master parameters this rank keeps
  // (its shards, or the full flat parameters for zero1/no_shard); grads: the gradients it keeps between
  // backward and the optimizer (fp32 shards, or full for zero1/no_shard); optimizer: moments/momentum of
  // its non-padding shard elements; buffers: everything transient at the peak — gathered parameters and
  // their gradients (one unit, two with prefetch, for full_shard/hybrid; all units' parameters for
  // shard_grad_op), reduce-scatter outputs, compute-side copies of offloaded or differently typed
  // masters, reduce-dtype wire copies and the fp32 scratch of a bf16 master.
  StateBytes state_bytes() const override {
    const int64_t master_b = static_cast<int64_t>(c10::elementSize(master_dtype_));
    const int64_t compute_b = static_cast<int64_t>(c10::elementSize(compute_dtype_));
    const int64_t reduce_b = static_cast<int64_t>(c10::elementSize(reduce_dtype_));
    StateBytes b;
    int64_t largest_unit = 0, all_units = 0, largest_wire = 0;
    for (const auto& unit : units_) {
      largest_unit = std::max(largest_unit, unit.padded * compute_b);
      largest_wire = std::max(largest_wire, unit.reduce_in.defined() ? unit.padded * reduce_b : 0);
      all_units += unit.padded * compute_b;
      switch (mode_) {
        case ShardingMode::full_shard:
        case ShardingMode::shard_grad_op:
        case ShardingMode::hybrid:
          b.params += unit.shard_numel * master_b;
          b.grads += unit.shard_numel * 4;
          b.buffers += unit.shard_numel * reduce_b;  // reduce-scatter output
          break;
        case ShardingMode::no_shard:
        case ShardingMode::zero1:
          b.params += unit.padded * compute_b;
          b.grads += unit.padded * compute_b;
          if (separate_compute_copy()) b.params += unit.shard_numel * master_b;             // the separate master
          if (!unit.shard_grad.is_same(unit.full_grad)) b.buffers += unit.shard_numel * 4;  // fp32 gradient shard
          if (mode_ == ShardingMode::zero1) b.buffers += unit.shard_numel * reduce_b;       // reduce-scatter output
          break;
      }
      if (separate_compute_copy()) b.buffers += unit.shard_numel * compute_b;  // compute-side copy of the master
      if (master_dtype_ != at::kFloat) b.buffers += unit.shard_numel * 4;      // fp32 scratch of the optimizer step
    }
    if (mode_ == ShardingMode::full_shard || mode_ == ShardingMode::hybrid)
      b.buffers += largest_unit * (prefetch_ ? 3 : 2);  // gathered params + grads, + the prefetched unit
    if (mode_ == ShardingMode::shard_grad_op) b.buffers += all_units + largest_unit;
    b.buffers += largest_wire;
    b.optimizer = optimizer_->state_bytes();
    return b;
  }

  double loss_scale() const override { return scaler_.used_scale(); }
  bool step_skipped() const override { return scaler_.skipped(); }

  std::map<std::string, std::string> dtype_audit() const override {
    auto name = [](at::ScalarType t) { return std::string(c10::getDtypeNames(t).first); };
    return {{"params", name(compute_dtype_)}, {"master", name(master_dtype_)}, {"grads", name(compute_dtype_)},
            {"grad_shards", "float32"},       {"reduce", name(reduce_dtype_)}, {"optimizer_state", "float32"}};
  }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (auto& unit : units_) {
      // The master parameters (what the optimizer updates), gathered, in fp32.
      at::Tensor flat;
      if (shard_group_size_ == 1) {
        flat = unit.shard.to(at::kFloat);
      } else {
        flat = at::empty({unit.padded}, unit.shard.options().dtype(at::kFloat));
        at::Tensor source = unit.shard.to(at::kFloat).clone();
        shard_comm_->all_gather(flat, source, CommAlgorithm::backend, "full_state").wait();
      }
      for (size_t i = 0; i < unit.params.size(); ++i)
        out.emplace_back(unit.params[i].name,
                         flat.narrow(0, unit.offsets[i], numel_of(unit.shapes[i])).view(unit.shapes[i]).clone());
    }
    // Model order: units are in model order and params in unit order, which is model order.
    return out;
  }

 private:
  static int64_t numel_of(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }

  // Gradients are summed over every rank's micro-batches; the mean divides by the data-parallel size. The
  // mutations (fault_injection.hpp) are deliberate bugs that the parity suite must catch.
  double mean_divisor() const {
    if (mutation("drop_world_factor")) return 1.0;
    if (mutation("sum_hybrid_replicas") && mode_ == ShardingMode::hybrid) return shard_group_size_;
    return static_cast<double>(layout().dp_size);
  }

  // The master shard needs a compute-side copy before gathers: offloaded, or in another dtype.
  bool separate_compute_copy() const { return offload_ || compute_dtype_ != master_dtype_; }

  // What goes on the wire for a unit's gradient: full_grad itself, or its copy in the reduce dtype.
  at::Tensor reduce_input(FlatUnit& unit) {
    if (!unit.reduce_in.defined()) return unit.full_grad;
    unit.reduce_in.copy_(unit.full_grad);
    return unit.reduce_in;
  }

  bool frees_after_forward() const { return mode_ == ShardingMode::full_shard || mode_ == ShardingMode::hybrid; }
  bool params_persist() const { return mode_ == ShardingMode::zero1 || mode_ == ShardingMode::no_shard; }

  void setup_groups(World& world) {
    Comm& all = world.comm();
    switch (mode_) {
      case ShardingMode::full_shard:
      case ShardingMode::shard_grad_op:
      case ShardingMode::zero1:
        shard_comm_ = &all;
        shard_group_size_ = world_size_;
        break;
      case ShardingMode::no_shard:
        replica_comm_ = &all;
        shard_group_size_ = 1;
        break;
      case ShardingMode::hybrid: {
        const int f = config_.parallel.shard_size > 0 ? static_cast<int>(config_.parallel.shard_size) : world_size_;
        if (world_size_ % f != 0)
          throw std::invalid_argument("parallel.shard_size=" + std::to_string(f) +
                                      " does not divide world_size=" + std::to_string(world_size_));
        shard_group_size_ = f;
        std::vector<std::vector<int>> shard_groups(static_cast<size_t>(world_size_ / f)),
            replica_groups(static_cast<size_t>(f));
        for (int r = 0; r < world_size_; ++r) {
          shard_groups[static_cast<size_t>(r / f)].push_back(r);
          replica_groups[static_cast<size_t>(r % f)].push_back(r);
        }
        if (f == world_size_) {
          shard_comm_ = &all;
        } else {
          owned_shard_comm_ = world.split("fsdp_shard", shard_groups);
          shard_comm_ = owned_shard_comm_.get();
          owned_replica_comm_ = world.split("fsdp_replica", replica_groups);
          replica_comm_ = owned_replica_comm_.get();
        }
        break;
      }
    }
    shard_rank_ = shard_comm_ ? shard_comm_->rank() : 0;
  }

  // Groups the model's units per parallel.wrap, flattens and shards each group.
  void build_units() {
    auto model_units = model_->units();
    const int L = static_cast<int>(model_->config().n_layers);
    std::vector<std::vector<int>> groups;
    const std::string& wrap = config_.parallel.wrap;
    if (wrap == "model") {
      groups.push_back({});
      for (int m = 0; m <= L + 1; ++m) groups.back().push_back(m);
    } else {
      const int per = wrap == "every_2" ? 2 : wrap == "every_4" ? 4 : 1;
      groups.push_back({0});
      for (int l = 0; l < L; l += per) {
        groups.push_back({});
        for (int k = l; k < std::min(L, l + per); ++k) groups.back().push_back(k + 1);
      }
      groups.push_back({L + 1});
    }
    const int64_t F = shard_group_size_;
    for (size_t g = 0; g < groups.size(); ++g) {
      FlatUnit unit;
      unit.model_units = groups[g];
      for (int m : groups[g]) {
        unit.name += (unit.name.empty() ? "" : "+") + model_units[static_cast<size_t>(m)].name;
        for (const ParamRef& p : model_units[static_cast<size_t>(m)].params) {
          unit.params.push_back(p);
          unit.shapes.push_back(p.tensor->sizes().vec());
          unit.offsets.push_back(unit.numel);
          unit.decay.push_back(!p.is_norm_or_embedding || config_.train.decay_norms_and_embeddings);
          unit.numel += p.tensor->numel();
        }
      }
      unit.padded = (unit.numel + F - 1) / F * F;
      unit.shard_numel = unit.padded / F;
      const auto options = at::TensorOptions().dtype(at::kFloat);

      // The initial flat parameters (identical on every rank: same seed), padded with zeros.
      at::Tensor initial = at::zeros({unit.padded}, options);
      for (size_t i = 0; i < unit.params.size(); ++i)
        initial.narrow(0, unit.offsets[i], unit.params[i].tensor->numel())
            .copy_(unit.params[i].tensor->detach().reshape({-1}));

      // Memory categories as state_bytes() counts them: what a rank keeps (params, grads) or works in (buffers).
      const auto compute = options.dtype(compute_dtype_);
      {
        MemoryScope held(params_persist() ? MemoryCategory::params : MemoryCategory::buffers);
        unit.full = at::zeros({unit.padded}, compute);
      }
      unit.full_writer = storage_alias(unit.full);
      {
        MemoryScope held(params_persist() ? MemoryCategory::grads : MemoryCategory::buffers);
        unit.full_grad = at::zeros({unit.padded}, compute);
      }
      const at::Tensor my_chunk = initial.narrow(0, shard_rank_ * unit.shard_numel, unit.shard_numel);
      if (params_persist()) {
        unit.full_writer.copy_(initial);
        unit.params_ready = true;
      }
      if (params_persist() && !separate_compute_copy()) {
        // The master shard is this rank's chunk of the persistent flat parameters.
        unit.shard = unit.full_writer.narrow(0, shard_rank_ * unit.shard_numel, unit.shard_numel);
      } else {
        MemoryScope held(MemoryCategory::params);
        unit.shard = my_chunk.to(master_dtype_).clone();
      }
      if (mode_ == ShardingMode::no_shard && !separate_compute_copy() && reduce_dtype_ == at::kFloat) {
        unit.shard_grad = unit.full_grad;  // F = 1: the all-reduced gradient is the shard's gradient
      } else {
        MemoryScope held(params_persist() ? MemoryCategory::buffers : MemoryCategory::grads);
        unit.shard_grad = at::zeros({unit.shard_numel}, options);  // fp32: gradients accumulate in fp32
      }
      MemoryScope buffers(MemoryCategory::buffers);
      if (separate_compute_copy()) unit.compute_shard = at::empty({unit.shard_numel}, compute);
      if (reduce_dtype_ != compute_dtype_) unit.reduce_in = at::empty({unit.padded}, options.dtype(reduce_dtype_));
      if (mode_ != ShardingMode::no_shard)  // no_shard all-reduces in place: no reduce-scatter output
        unit.reduce_out = at::empty({unit.shard_numel}, options.dtype(reduce_dtype_));
      if (master_dtype_ != at::kFloat) {
        unit.master_scratch = at::zeros({unit.shard_numel}, options);  // released after build_optimizer
      }

      // Bind the model's parameters to views of the gathered buffer; their .grad to views of full_grad.
      for (size_t i = 0; i < unit.params.size(); ++i) {
        const int64_t n = numel_of(unit.shapes[i]);
        at::Tensor view = unit.full.narrow(0, unit.offsets[i], n).view(unit.shapes[i]);
        view.requires_grad_(true);
        view.mutable_grad() = unit.full_grad.narrow(0, unit.offsets[i], n).view(unit.shapes[i]);
        *unit.params[i].tensor = view;
        unit.views.push_back(view);
      }
      if (!params_persist()) {  // views exist now (slicing checks storage bounds); drop the bytes until needed
        release_storage(unit.full);
        release_storage(unit.full_grad);
      }
      units_.push_back(std::move(unit));
    }
    for (size_t u = 0; u < units_.size(); ++u)
      for (auto& view : units_[u].views)
        torch::autograd::impl::set_post_acc_grad_hooks(view, std::make_unique<UnitGradHook>(this, u));
  }

  // The optimizer sees, per unit, the pieces of this rank's shard that belong to each parameter
  // (padding excluded), so weight decay follows the parameter and the update equals the unsharded one.
  void build_optimizer() {
    std::vector<at::Tensor> params;
    std::vector<bool> decay;
    for (auto& unit : units_) {
      const int64_t begin = shard_rank_ * unit.shard_numel, end = begin + unit.shard_numel;
      for (size_t i = 0; i < unit.params.size(); ++i) {
        const int64_t a = std::max(begin, unit.offsets[i]);
        const int64_t b = std::min(end, unit.offsets[i] + numel_of(unit.shapes[i]));
        if (a >= b) continue;
        const at::Tensor& updated = master_dtype_ == at::kFloat ? unit.shard : unit.master_scratch;
        params.push_back(updated.narrow(0, a - begin, b - a));
        optimizer_grads_.push_back(unit.shard_grad.narrow(0, a - begin, b - a));
        decay.push_back(unit.decay[i]);
      }
    }
    optimizer_ = make_optimizer(config_.train, std::move(params), std::move(decay));
  }

  at::Tensor run_model_unit(int m, const at::Tensor& x) {
    const int L = static_cast<int>(model_->config().n_layers);
    if (m == 0) return model_->embed(x);
    if (m == L + 1) return model_->head(x);
    return run_block(*model_, m - 1, x, checkpointing_, config_.parallel.checkpoint_every);
  }

  void start_gather(FlatUnit& unit) {
    if (unit.params_ready || unit.gather_pending) return;
    ensure_storage(unit.full, unit.padded * static_cast<int64_t>(unit.full.element_size()));
    at::Tensor source = unit.shard;
    if (separate_compute_copy()) source = unit.compute_shard.copy_(unit.shard);  // host -> compute, and/or cast
    if (shard_group_size_ == 1) {
      unit.full_writer.copy_(source);
      unit.params_ready = true;
      return;
    }
    unit.gather = shard_comm_->all_gather(unit.full_writer, source, CommAlgorithm::backend, "fsdp.params." + unit.name);
    unit.gather_pending = true;
  }

  void ensure_gathered(FlatUnit& unit) {
    start_gather(unit);
    if (unit.gather_pending) {
      unit.gather.wait();
      unit.gather_pending = false;
      unit.params_ready = true;
    }
  }

  void wait_pending_gathers() {
    for (auto& unit : units_)
      if (unit.gather_pending) {
        unit.gather.wait();
        unit.gather_pending = false;
        unit.params_ready = true;
      }
  }

  void release_params(FlatUnit& unit) {
    if (params_persist()) return;
    if (unit.gather_pending) {
      unit.gather.wait();
      unit.gather_pending = false;
    }
    release_storage(unit.full);
    unit.params_ready = false;
  }

  // Reduce-scatters the unit's full gradient over the shard group into its gradient shard.
  void reduce_scatter_into(FlatUnit& unit, bool accumulate) {
    at::Tensor& out = unit.reduce_out;
    at::Tensor input = reduce_input(unit);
    if (shard_group_size_ == 1) {
      out.copy_(input);
    } else {
      shard_comm_->reduce_scatter(out, input, algorithm_, "fsdp.grads." + unit.name).wait();
    }
    if (accumulate) {
      unit.shard_grad.add_(out);
    } else {
      unit.shard_grad.copy_(out);
    }
  }

  ShardingMode mode_;
  std::string id_;
  std::shared_ptr<GPT> model_;
  Config config_;
  int world_size_ = 1, rank_ = 0, shard_group_size_ = 1, shard_rank_ = 0;
  bool offload_ = false, prefetch_ = true, is_last_micro_ = true;
  CheckpointMode checkpointing_ = CheckpointMode::none;
  at::ScalarType compute_dtype_ = at::kFloat, reduce_dtype_ = at::kFloat, master_dtype_ = at::kFloat;
  LossScaler scaler_{PrecisionConfig{}};
  int64_t steps_seen_ = 0;
  CommAlgorithm algorithm_ = CommAlgorithm::ring;
  Comm* shard_comm_ = nullptr;
  Comm* replica_comm_ = nullptr;
  std::shared_ptr<Comm> owned_shard_comm_, owned_replica_comm_;
  std::vector<FlatUnit> units_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<at::Tensor> optimizer_grads_;
};

void UnitGradHook::operator()(const torch::autograd::Variable&) { strategy->on_grad_ready(unit); }

}  // namespace

std::unique_ptr<Strategy> make_sharded_strategy(ShardingMode mode, const std::string& id) {
  return std::make_unique<ShardedStrategy>(mode, id);
}

}  // namespace dtlab
