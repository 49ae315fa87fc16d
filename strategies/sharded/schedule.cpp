// schedule.cpp: the gathers, frees, reduce-scatters and all-reduces of the sharded strategies (see schedule.hpp).
#include "strategies/sharded/schedule.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "lab/memory.hpp"

namespace dtlab {
namespace {

struct UnitGradHook final : torch::autograd::PostAccumulateGradHook {
  UnitGradHook(ShardedSchedule* s, size_t u) : schedule(s), unit(u) {}
  void operator()(const torch::autograd::Variable&) override { schedule->on_grad_ready(unit); }
  ShardedSchedule* schedule;
  size_t unit;
};

}  // namespace

ShardedSchedule::ShardedSchedule(ShardingMode mode, std::vector<FlatUnit>& units, const ShardGroups& groups,
                                 const ShardedPrecision& precision, bool prefetch,
                                 CommAlgorithm reduce_scatter_algorithm)
    : traits_(traits(mode)),
      units_(units),
      groups_(groups),
      precision_(precision),
      prefetch_(prefetch),
      algorithm_(reduce_scatter_algorithm),
      copies_(precision.offload ? CopyStream(precision.device) : CopyStream()) {}

void ShardedSchedule::register_grad_hooks() {
  for (size_t u = 0; u < units_.size(); ++u)
    for (auto& view : units_[u].views)
      torch::autograd::impl::set_post_acc_grad_hooks(view, std::make_unique<UnitGradHook>(this, u));
}

void ShardedSchedule::before_unit_forward(size_t u) {
  ensure_gathered(units_[u]);
  if (prefetch_ && u + 1 < units_.size() && same_chunk(u, u + 1)) start_gather(units_[u + 1]);
}

// Without stages the last unit stays gathered (its backward comes right away); per micro-batch under stages, every
// unit is freed (other micro-batches' work comes between).
void ShardedSchedule::after_unit_forward(size_t u) {
  if (traits_.frees_params_after_forward() && (per_micro_batch() || u + 1 < units_.size())) release_params(units_[u]);
}

void ShardedSchedule::before_unit_backward(size_t u) {
  FlatUnit& unit = units_[u];
  ensure_gathered(unit);
  if (!has_storage(unit.full_grad)) {
    ensure_storage(unit.full_grad, unit.padded * static_cast<int64_t>(unit.full_grad.element_size()));
    unit.full_grad.zero_();
  }
  if (prefetch_ && u > 0 && same_chunk(u, u - 1)) start_gather(units_[u - 1]);
}

// Post-backward of unit u once every parameter's gradient has been accumulated.
void ShardedSchedule::on_grad_ready(size_t u) {
  FlatUnit& unit = units_[u];
  if (++unit.grads_ready < unit.params.size()) return;
  unit.grads_ready = 0;
  // Under stages the hooks reduce only when a B is the whole backward of a micro-batch re-gathered per micro-batch;
  // otherwise after the flush (reduce_after_flush) or after W (reduce_chunk).
  if (pipelined_ && gathers_ != PipelineGathers::per_micro_batch) return;
  switch (traits_.grads) {
    case GradReduction::reduce_scatter_every_micro_step:
      wait_pending_gathers();  // one collective stream: finish prefetches before the ring's send/recv
      start_reduce_scatter(unit, /*accumulate=*/true);
      release_params(unit);  // the reduce-scatter reads the gradient only
      break;
    case GradReduction::all_reduce_last_micro_step:
    case GradReduction::reduce_scatter_last_micro_step:
      if (is_last_micro_) reduce_accumulated(unit);
      break;
  }
}

// The modes that reduce once per step: the unit's full gradient, accumulated over the step's micro-batches.
void ShardedSchedule::reduce_accumulated(FlatUnit& unit) {
  if (traits_.all_reduces_grads()) {
    at::Tensor wire = reduce_input(unit);
    unit.grad_reduce = groups_.replica->all_reduce(wire, "fsdp.grads." + unit.name);
    return;
  }
  wait_pending_gathers();  // one collective stream: finish prefetches before the ring's send/recv
  start_reduce_scatter(unit, /*accumulate=*/false);
}

void ShardedSchedule::begin_pipeline_step(PipelineGathers gathers) {
  if (gathers == PipelineGathers::none) throw std::logic_error("begin_pipeline_step: no pipeline stages");
  pipelined_ = true;
  gathers_ = gathers;
  if (per_micro_batch()) return;  // the chunks' hooks gather (schedule.hpp)
  for (FlatUnit& unit : units_) {
    ensure_gathered(unit);
    if (!traits_.params_persist() && !has_storage(unit.full_grad)) {  // released after the last step's reduce
      ensure_storage(unit.full_grad, unit.padded * static_cast<int64_t>(unit.full_grad.element_size()));
      unit.full_grad.zero_();
    }
  }
}

void ShardedSchedule::release_chunk(int chunk) {
  for (FlatUnit& unit : units_)
    if (unit.chunk == chunk) release_params(unit);
}

void ShardedSchedule::after_chunk_backward(int chunk) {
  if (gathers_ == PipelineGathers::per_micro_batch_after_w)
    release_chunk(chunk);  // the gradients wait for W
  else
    finish_backward();  // the hooks reduced every unit; the last reduce-scatter is still in flight
}

void ShardedSchedule::prepare_chunk_gradients(int chunk) {
  for (FlatUnit& unit : units_)
    if (unit.chunk == chunk && !has_storage(unit.full_grad)) {
      ensure_storage(unit.full_grad, unit.padded * static_cast<int64_t>(unit.full_grad.element_size()));
      unit.full_grad.zero_();
    }
}

void ShardedSchedule::reduce_chunk(int chunk) {
  if (gathers_ != PipelineGathers::per_micro_batch_after_w)
    throw std::logic_error("reduce_chunk: only after zero bubble's W, re-gathering per micro-batch");
  release_chunk(chunk);
  for (size_t u = units_.size(); u-- > 0;) {
    if (units_[u].chunk != chunk) continue;
    units_[u].grads_ready = 0;
    start_reduce_scatter(units_[u], /*accumulate=*/true);  // finishes the one in flight first
  }
  finish_backward();
}

void ShardedSchedule::reduce_after_flush() {
  if (!pipelined_) throw std::logic_error("reduce_after_flush: no pipeline step began (begin_pipeline_step)");
  if (per_micro_batch()) {  // every chunk's micro-batches were reduced as they completed
    finish_backward();
    return;
  }
  for (size_t u = units_.size(); u-- > 0;) {
    units_[u].grads_ready = 0;
    reduce_accumulated(units_[u]);
    release_params(units_[u]);  // the reduce reads the gradient only; persistent parameters stay
  }
  finish_backward();
}

void ShardedSchedule::finish_host_copy() {
  if (copying_ == nullptr) return;
  copies_.wait();
  if (copying_accumulates_)
    copying_->shard_grad.add_(copy_staging_);
  else
    copying_->shard_grad.copy_(copy_staging_);
  copying_ = nullptr;
  copy_staging_.reset();
}

void ShardedSchedule::finish_unit_gradients(FlatUnit& unit) {
  if (traits_.all_reduces_grads()) {
    unit.grad_reduce.wait();
    const at::Tensor& reduced = unit.reduce_in.defined() ? unit.reduce_in : unit.full_grad;  // all-reduced in place
    if (!unit.shard_grad.is_same(reduced)) unit.shard_grad.copy_(reduced);
  }
  if (traits_.replica_all_reduce && groups_.replica) {
    // Across replicas in the reduce dtype, like the reduce-scatter inside the group.
    at::Tensor wire = precision_.reduce == at::kFloat ? unit.shard_grad : unit.shard_grad.to(precision_.reduce);
    groups_.replica->all_reduce(wire, "fsdp.replicas." + unit.name).wait();
    if (!wire.is_same(unit.shard_grad)) unit.shard_grad.copy_(wire);
  }
}

void ShardedSchedule::refresh_params_after_step() {
  // zero1 sends each unit's updated shard: the compute-side copy, or, when the shard is a view of the buffer the
  // all-gather writes, a copy of it in one source buffer of the largest shard's size, reused unit after unit (each
  // all-gather is waited for first). A clone per unit would be freed only when Gloo drops its work, which can be
  // after the next unit's clone exists.
  at::Tensor source_buffer;
  if (traits_.gathers_after_optimizer && !precision_.separate_compute_copy()) {
    int64_t largest = 0;
    for (const auto& unit : units_) largest = std::max(largest, unit.shard_numel);
    MemoryScope buffers(MemoryCategory::buffers);
    if (!units_.empty()) source_buffer = at::empty({largest}, units_.front().shard.options());
  }
  for (auto& unit : units_) {
    if (traits_.gathers_after_optimizer) {
      at::Tensor source = precision_.separate_compute_copy()
                              ? unit.compute_shard.copy_(unit.shard, /*non_blocking=*/true)  // see schedule.hpp
                              : source_buffer.narrow(0, 0, unit.shard_numel).copy_(unit.shard);
      groups_.all_gather(unit.full_writer, source, "zero1.params." + unit.name).wait();
    } else if (traits_.params_persist() && precision_.separate_compute_copy()) {
      unit.params_ready = false;  // the master changed: copy (and cast) again at the next gather
    }
  }
}

void ShardedSchedule::start_gather(FlatUnit& unit) {
  if (unit.params_ready || unit.gather_pending) return;
  ensure_storage(unit.full, unit.padded * static_cast<int64_t>(unit.full.element_size()));
  at::Tensor source = unit.shard;
  if (precision_.separate_compute_copy())  // host -> compute (the host does not wait: schedule.hpp), and/or cast
    source = unit.compute_shard.copy_(unit.shard, /*non_blocking=*/true);
  if (groups_.size == 1) {
    unit.full_writer.copy_(source);
    unit.params_ready = true;
    return;
  }
  unit.gather = groups_.all_gather(unit.full_writer, source, "fsdp.params." + unit.name);
  unit.gather_pending = true;
}

void ShardedSchedule::ensure_gathered(FlatUnit& unit) {
  start_gather(unit);
  if (unit.gather_pending) {
    unit.gather.wait();
    unit.gather_pending = false;
    unit.params_ready = true;
  }
}

void ShardedSchedule::wait_pending_gathers() {
  for (auto& unit : units_)
    if (unit.gather_pending) {
      unit.gather.wait();
      unit.gather_pending = false;
      unit.params_ready = true;
    }
}

void ShardedSchedule::release_params(FlatUnit& unit) {
  if (traits_.params_persist()) return;
  if (unit.gather_pending) {
    unit.gather.wait();
    unit.gather_pending = false;
  }
  release_storage(unit.full);
  unit.params_ready = false;
}

// What goes on the wire for a unit's gradient: full_grad itself, or its copy in the reduce dtype.
at::Tensor ShardedSchedule::reduce_input(FlatUnit& unit) {
  if (!unit.reduce_in.defined()) return unit.full_grad;
  ensure_storage(unit.reduce_in, unit.padded * static_cast<int64_t>(unit.reduce_in.element_size()));
  unit.reduce_in.copy_(unit.full_grad);
  return unit.reduce_in;
}

void ShardedSchedule::start_reduce_scatter(FlatUnit& unit, bool accumulate) {
  finish_pending_reduce();  // at most one in flight
  at::Tensor input = reduce_input(unit);
  if (groups_.size == 1) {
    unit.reduce_out.copy_(input);
  } else {
    reduce_ = groups_.reduce_scatter(unit.reduce_out, input, algorithm_, "fsdp.grads." + unit.name);
  }
  reducing_ = &unit;
  reducing_accumulates_ = accumulate;
}

void ShardedSchedule::finish_pending_reduce() {
  if (reducing_ == nullptr) return;
  FlatUnit& unit = *reducing_;
  reducing_ = nullptr;
  reduce_.wait();
  const at::Tensor& out = unit.reduce_out;
  if (out.device() != unit.shard_grad.device()) {  // offloaded on a GPU: to the host shard on the copy stream
    finish_host_copy();                            // the previous unit's, issued one unit ago
    copy_staging_ = at::empty(out.sizes(), out.options().device(at::kCPU).pinned_memory(true));
    copies_.to_host(copy_staging_, out);
    copying_ = &unit;
    copying_accumulates_ = reducing_accumulates_;
  } else if (reducing_accumulates_) {
    unit.shard_grad.add_(out);
  } else {
    unit.shard_grad.copy_(out);
  }
  if (unit.reduce_in.defined()) release_storage(unit.reduce_in);  // the wire copy, refilled at the next one
  if (traits_.reduce_scatters_every_micro_step()) {               // the full gradient is rebuilt in the next backward
    unit.full_grad.zero_();
    release_storage(unit.full_grad);
  }
}

}  // namespace dtlab
