// engine.cpp: ShardedEngine, the Strategy of every sharded mode: wires the flat units, the groups, the
// gather/reduce schedule and the sharded optimizer (engine.hpp), and adds loss scaling, the gradient mean and norm,
// the state accounting and the full-state export.
#include "strategies/sharded/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "lab/comm/comm.hpp"
#include "lab/dtype_torch.hpp"
#include "lab/instrument/fault_injection.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"
#include "lab/train/loss_scaler.hpp"
#include "lab/train/model_runner.hpp"
#include "lab/train/state_pieces.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "strategies/sharded/flat_unit.hpp"
#include "strategies/sharded/groups.hpp"
#include "strategies/sharded/optimizer.hpp"
#include "strategies/sharded/schedule.hpp"

namespace dtlab {

namespace {

class ShardedEngine final : public Strategy {
 public:
  ShardedEngine(ShardingMode mode, std::string id) : mode_(mode), traits_(traits(mode)), id_(std::move(id)) {}
  std::string id() const override { return id_; }
  // Every data-parallel rank sees its own data: shard groups and replica groups (hybrid) both split the model's
  // state, not the batch, so the layout is the mesh's data-parallel group.
  ParallelLayout layout() const override { return {.dp_rank = dp_rank_, .dp_size = dp_size_, .dp_comm = dp_comm_}; }

  void wrap(std::shared_ptr<GPT> model, const Config& config, MeshComms& comms) override {
    precision_.compute = scalar_type_named(config.precision.param_dtype, "precision.param_dtype");
    precision_.reduce = scalar_type_named(config.precision.reduce_dtype, "precision.reduce_dtype");
    precision_.master = scalar_type_named(config.precision.master_dtype, "precision.master_dtype");
    scaler_ = LossScaler(config.precision);
    strategy_spec(id_).check(config);  // refusals (check_sharded in strategies/sharded_plan.cpp)
    model_ = std::move(model);
    config_ = config;
    rank_ = comms.rank();
    dp_size_ = comms.size_of(kDataParallelDims);
    dp_rank_ = comms.index_in(kDataParallelDims);
    runner_ = ModelRunner(model_, config.parallel);
    precision_.offload = config.parallel.offload;
    precision_.device = model_->parameters().front().tensor->device();  // a later stage holds no embedding
    prefetch_ = config.parallel.prefetch;
    const CommAlgorithm algorithm =
        config.parallel.reduce_scatter == "backend" ? CommAlgorithm::backend : CommAlgorithm::ring;
    groups_ = make_shard_groups(mode_, config_, comms);  // refusals first, before any communicator is used
    dp_comm_ = &comms.data_parallel();
    // A tp group's ranks hold different slices and a pp group's different stages: the overflow vote of dynamic loss
    // scaling spans them too.
    vote_comms_.clear();
    for (const MeshDim dim : {MeshDim::tp, MeshDim::pp})
      if (comms.size_of({dim}) > 1) vote_comms_.push_back(&comms.comm({dim}));
    units_ = build_flat_units(*model_, config_, mode_, precision_, groups_.size, groups_.rank,
                              chunks_on_rank(config_, rank_));
    counted_.clear();
    for (const FlatUnit& unit : units_) counted_.push_back(counted_shard_ranges(unit, groups_.rank));
    schedule_ = std::make_unique<ShardedSchedule>(mode_, units_, groups_, precision_, prefetch_, algorithm);
    schedule_->register_grad_hooks();
    optimizer_ = std::make_unique<ShardedOptimizer>(config_, units_, groups_.rank, precision_);
  }

  double forward_backward(const Batch& batch, double loss_weight, bool is_last_micro) override {
    schedule_->begin_micro_step(is_last_micro);
    UnitGroups groups;  // the flat units: gather before each, hook its output's gradient, free after
    for (const FlatUnit& unit : units_) {
      groups.names.push_back(unit.name);
      groups.units.push_back(unit.model_units);
    }
    ShardedSchedule* schedule = schedule_.get();
    // The last unit's output (the logits) stays alive until backward ends, as the memory model and the measured
    // peaks of the sharded strategies have it (analysis/cost/memory_model.cpp); releasing it before backward
    // lowers their peak by the logits' bytes and is a change of the model, not of this seam.
    at::Tensor logits;
    groups.before = [schedule](size_t u) { schedule->before_unit_forward(u); };
    groups.after = [schedule, &logits, last = units_.size() - 1](size_t u, at::Tensor& output) {
      output.register_hook([schedule, u](const at::Tensor&) { schedule->before_unit_backward(u); });
      schedule->after_unit_forward(u);
      if (u == last) logits = output;
    };
    const at::Tensor loss = runner_.forward_loss(batch, loss_weight, &groups);
    // The last unit's reduce-scatter is still in flight when autograd returns: finish_backward waits for it.
    return runner_.backward(loss, static_cast<double>(dp_size_) * scaler_.scale(), rank_,
                            [schedule] { schedule->finish_backward(); });
  }

  // Under pipeline stages: the schedule runs the stage's units itself (lab/train/pipeline_step.hpp). Gathered once
  // (the default): the modes that free parameters gather each unit now and keep it through the flush, no hook
  // reduces (a unit's last backward comes at another time on each stage), the backwards accumulate every unit's
  // full gradient, and finish_gradients reduces them all. Per micro-batch (parallel.pp_reshard_after_forward): the
  // chunks run with the forward hooks and each micro-batch's gradients are reduce-scattered as its backward
  // completes them (ShardedSchedule::begin_pipeline_step).
  std::optional<PipelineAccess> pipeline_access() override {
    under_pipeline_ = true;
    schedule_->begin_micro_step(/*is_last_micro=*/false);
    const PipelineGathers gathers = pipeline_gathers(config_.parallel);
    schedule_->begin_pipeline_step(gathers);
    PipelineAccess access;
    access.model = model_;
    access.loss_factor = static_cast<double>(dp_size_) * scaler_.scale();
    if (gathers == PipelineGathers::once_per_step) return access;
    ShardedSchedule* schedule = schedule_.get();
    int chunks = 0;
    for (const FlatUnit& unit : units_) chunks = std::max(chunks, unit.chunk + 1);
    access.chunk_groups.resize(static_cast<size_t>(chunks));
    std::vector<std::vector<size_t>> unit_of_group(static_cast<size_t>(chunks));  // flat unit of each group
    for (size_t u = 0; u < units_.size(); ++u) {
      UnitGroups& groups = access.chunk_groups[static_cast<size_t>(units_[u].chunk)];
      groups.names.push_back(units_[u].name);
      groups.units.push_back(units_[u].model_units);
      unit_of_group[static_cast<size_t>(units_[u].chunk)].push_back(u);
    }
    for (size_t c = 0; c < access.chunk_groups.size(); ++c) {
      const std::vector<size_t> flat = unit_of_group[c];
      access.chunk_groups[c].before = [schedule, flat](size_t g) { schedule->before_unit_forward(flat[g]); };
      access.chunk_groups[c].after = [schedule, flat](size_t g, at::Tensor& output) {
        const size_t u = flat[g];
        output.register_hook([schedule, u](const at::Tensor&) { schedule->before_unit_backward(u); });
        schedule->after_unit_forward(u);
      };
    }
    access.before_action = [schedule](PipeOp op, int chunk) {
      if (op == PipeOp::weight) schedule->prepare_chunk_gradients(chunk);
    };
    access.after_action = [schedule](PipeOp op, int chunk) {
      if (op == PipeOp::backward) schedule->after_chunk_backward(chunk);
      if (op == PipeOp::weight) schedule->reduce_chunk(chunk);
    };
    return access;
  }

  void finish_gradients() override {
    schedule_->wait_pending_gathers();
    if (under_pipeline_) schedule_->reduce_after_flush();
    ++steps_seen_;
    for (auto& unit : units_) {
      schedule_->finish_unit_gradients(unit);
      unit.shard_grad.div_(mean_divisor() * scaler_.scale());
    }
    if (inject_nonfinite(steps_seen_, rank_) && !units_.empty()) units_[0].shard_grad[0] = nonfinite_injection_value();
    double any_bad = 0;
    if (scaler_.enabled()) {  // every rank learns whether any rank saw inf/nan, and all skip together
      double local_bad = 0;
      for (const auto& unit : units_) local_bad += unit.shard_grad.isfinite().all().item<bool>() ? 0.0 : 1.0;
      at::Tensor flag = at::full({1}, local_bad, at::kDouble);
      (groups_.shard ? groups_.shard : groups_.replica)->all_reduce(flag, "loss_scale.found_inf").wait();
      if (groups_.replica && groups_.shard && groups_.replica != groups_.shard)
        groups_.replica->all_reduce(flag, "loss_scale.found_inf").wait();
      for (Comm* comm : vote_comms_) comm->all_reduce(flag, "loss_scale.found_inf").wait();
      any_bad = flag.item<double>();
    }
    scaler_.finish_step(any_bad > 0);
  }

  double grad_sum_of_squares() override {
    if (scaler_.skipped()) return std::numeric_limits<double>::infinity();  // reported; the step is skipped anyway
    double local = 0.0;  // this rank's shard, less what another model-parallel rank counts (counted_)
    for (size_t u = 0; u < units_.size(); ++u)
      for (const auto& [begin, end] : counted_[u])
        local += units_[u].shard_grad.narrow(0, begin, end - begin).pow(2).sum().item<double>();
    if (traits_.grads_replicated()) return local;  // every rank holds every gradient
    at::Tensor t = at::full({1}, local, at::kDouble);
    groups_.shard->all_reduce(t, "grad_norm").wait();
    return t.item<double>();
  }

  void scale_gradients(double factor) override {
    for (auto& unit : units_) unit.shard_grad.mul_(factor);
  }

  void optimizer_step(double lr) override {
    if (scaler_.skipped()) return;  // no update, optimizer state untouched; the scaler halved the scale
    optimizer_->step(lr, steps_seen_, rank_);
    schedule_->refresh_params_after_step();
  }

  void zero_grad() override {
    for (auto& unit : units_) {
      unit.shard_grad.zero_();
      if (has_storage(unit.full_grad)) unit.full_grad.zero_();
      unit.grads_ready = 0;
    }
  }

  StateBytes state_bytes() const override;

  double loss_scale() const override { return scaler_.used_scale(); }
  bool step_skipped() const override { return scaler_.skipped(); }

  std::map<std::string, std::string> dtype_audit() const override {
    auto name = [](at::ScalarType t) { return std::string(c10::getDtypeNames(t).first); };
    return {{"params", name(precision_.compute)}, {"master", name(precision_.master)},
            {"grads", name(precision_.compute)},  {"grad_shards", "float32"},
            {"reduce", name(precision_.reduce)},  {"optimizer_state", "float32"}};
  }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override;
  std::vector<StatePiece> state_pieces() override;

  std::map<std::string, double> state_scalars() const override {
    std::map<std::string, double> scalars{{kStepsSeenScalar, static_cast<double>(steps_seen_)}};
    add_common_scalars(scalars, optimizer_->inner(), &scaler_);
    return scalars;
  }

  // The master shards were loaded: the compute parameters follow them (zero1 gathers them now, the other modes at
  // their next gather).
  void restore_state(const std::map<std::string, double>& scalars) override {
    restore_common_scalars(scalars, optimizer_->inner(), &scaler_);
    if (const auto it = scalars.find(kStepsSeenScalar); it != scalars.end()) steps_seen_ = std::llround(it->second);
    schedule_->wait_pending_gathers();
    for (auto& unit : units_)
      if (!traits_.params_persist()) unit.params_ready = false;
    schedule_->refresh_params_after_step();
  }

 private:
  // Gradients are summed over every rank's micro-batches; the mean divides by the data-parallel size. The
  // mutations (fault_injection.hpp) are deliberate bugs that the parity suite must catch.
  double mean_divisor() const {
    if (mutation("drop_world_factor")) return 1.0;
    if (mutation("sum_hybrid_replicas") && traits_.replica_all_reduce) return groups_.size;
    return static_cast<double>(dp_size_);
  }

  ShardingMode mode_;
  ShardingTraits traits_;
  std::string id_;
  std::shared_ptr<GPT> model_;
  Config config_;
  int rank_ = 0, dp_size_ = 1, dp_rank_ = 0;  // rank_: in the world (fault injection, rounding); dp_: in dp group
  Comm* dp_comm_ = nullptr;
  std::vector<Comm*> vote_comms_;  // the tp and pp groups of more than one rank: the overflow vote spans them
  ModelRunner runner_;
  bool prefetch_ = true;
  ShardedPrecision precision_;
  LossScaler scaler_{PrecisionConfig{}};
  int64_t steps_seen_ = 0;
  bool under_pipeline_ = false;  // a pipeline schedule runs the micro-batches (pipeline_access)
  ShardGroups groups_;
  std::vector<FlatUnit> units_;
  // Per unit, the ranges of its shard the gradient norm counts on this rank (flat_unit.hpp counted_shard_ranges).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> counted_;
  std::unique_ptr<ShardedSchedule> schedule_;
  std::unique_ptr<ShardedOptimizer> optimizer_;
};

// Exact bytes per rank by category (padding included). params: the master parameters this rank keeps
// (its shards, or the full flat parameters for zero1/no_shard); grads: the gradients it keeps between
// backward and the optimizer (fp32 shards, or full for zero1/no_shard); optimizer: moments/momentum of
// its non-padding shard elements; buffers: everything transient at the peak — gathered parameters and
// their gradients and reduce-dtype wire copies at the worst moment (unit_buffers_peak_bytes in sharding.hpp),
// reduce-scatter outputs, compute-side copies of offloaded or differently typed masters, and the larger of the
// backward's transient buffers and the fp32 scratch of a bf16 master's optimizer step.
StateBytes ShardedEngine::state_bytes() const {
  const int64_t master_b = static_cast<int64_t>(c10::elementSize(precision_.master));
  const int64_t compute_b = static_cast<int64_t>(c10::elementSize(precision_.compute));
  const int64_t reduce_b = static_cast<int64_t>(c10::elementSize(precision_.reduce));
  const bool separate_copy = precision_.separate_compute_copy();
  StateBytes b;
  std::vector<UnitBuffers> transient;
  int64_t step_scratch = 0;
  for (const auto& unit : units_) {
    transient.push_back(
        {.gathered = unit.padded * compute_b,
         .wire = unit.reduce_in.defined() ? unit.padded * reduce_b : 0,
         .gather_source = traits_.gathers_after_optimizer && !separate_copy ? unit.shard_numel * compute_b : 0,
         .chunk = unit.chunk});
    if (!traits_.params_persist()) {
      b.params += unit.shard_numel * master_b;
      b.grads += unit.shard_numel * 4;
      b.buffers += unit.shard_numel * reduce_b;  // reduce-scatter output
    } else {
      b.params += unit.padded * compute_b;
      b.grads += unit.padded * compute_b;
      if (separate_copy) b.params += unit.shard_numel * master_b;                       // the separate master
      if (!unit.shard_grad.is_same(unit.full_grad)) b.buffers += unit.shard_numel * 4;  // fp32 gradient shard
      if (traits_.reduce_scatters_grads()) b.buffers += unit.shard_numel * reduce_b;    // reduce-scatter output
    }
    if (separate_copy) b.buffers += unit.shard_numel * compute_b;               // compute-side copy of the master
    if (precision_.master != at::kFloat) step_scratch += unit.shard_numel * 4;  // fp32 scratch of the optimizer step
  }
  // The scratch lives only through the optimizer step (optimizer.cpp), when no unit is gathered or reduced.
  b.buffers += std::max(unit_buffers_peak_bytes(traits_, transient, prefetch_, pipeline_gathers(config_.parallel)),
                        step_scratch);
  b.optimizer = optimizer_->state_bytes();
  if (precision_.offload) {  // the master shards, their fp32 gradients and the optimizer state, in host buffers
    for (const auto& unit : units_) b.host += unit.shard_numel * (master_b + 4);
    b.host += b.optimizer;
  }
  return b;
}

std::vector<std::pair<std::string, at::Tensor>> ShardedEngine::full_state() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& unit : units_) {
    // The master parameters (what the optimizer updates), gathered, in fp32.
    at::Tensor flat;
    if (groups_.size == 1) {
      flat = unit.shard.to(at::kFloat);
    } else {
      flat = at::empty({unit.padded}, unit.shard.options().dtype(at::kFloat));
      at::Tensor source = unit.shard.to(at::kFloat).clone();
      groups_.all_gather(flat, source, "full_state").wait();
    }
    for (size_t i = 0; i < unit.params.size(); ++i)
      out.emplace_back(unit.params[i].name,
                       flat.narrow(0, unit.offsets[i], numel_of(unit.shapes[i])).view(unit.shapes[i]).clone());
  }
  // Model order: units are in model order and params in unit order, which is model order.
  return out;
}

// The master shards and the optimizer state, by parameter: one piece per slot of the sharded optimizer (padding
// excluded). The ranks of the first shard group write them; replicas (hybrid's other groups, no_shard's other ranks)
// hold the same pieces.
std::vector<StatePiece> ShardedEngine::state_pieces() {
  const bool written_here = dp_rank_ < groups_.size;
  Optimizer& inner = optimizer_->inner();
  const auto& slots = optimizer_->slots();
  std::vector<StatePiece> out;
  auto piece = [&](const std::string& name, const ShardedOptimizer::Slot& slot, const at::Tensor& data) {
    const FlatUnit& unit = units_[slot.unit];
    out.push_back({.name = name + unit.params[slot.param].name,
                   .shape = unit.shapes[slot.param],
                   .begin = slot.param_offset,
                   .data = data,
                   .written_here = written_here,
                   .chunk = {}});
  };
  for (const auto& slot : slots)
    piece("param.", slot, units_[slot.unit].shard.narrow(0, slot.shard_offset, slot.numel));
  const HostMemoryScope host(precision_.offload);  // state made here on first use (SGD momentum) is the optimizer's
  for (const std::string& kind : inner.state_kinds())
    for (size_t i = 0; i < slots.size(); ++i) piece("optim." + kind + ".", slots[i], inner.state(kind, i));
  return out;
}

}  // namespace

std::unique_ptr<Strategy> make_sharded_strategy(ShardingMode mode, const std::string& id) {
  return std::make_unique<ShardedEngine>(mode, id);
}

}  // namespace dtlab
