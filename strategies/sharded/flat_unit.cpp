// flat_unit.cpp: building the sharded strategies' flat units (grouping, flattening, sharding, memory categories)
// and binding the model's parameters to views of the flat storage.
#include "strategies/sharded/flat_unit.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "lab/memory.hpp"
#include "lab/unit_layout.hpp"

namespace dtlab {

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

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

namespace {

// A tensor over the same storage with its own version counter (collective writes into gathered
// parameters must not invalidate what autograd saved from them).
at::Tensor storage_alias(const at::Tensor& t) {
  at::Tensor alias = at::empty({0}, t.options());
  alias.set_(t.storage(), 0, {t.numel()}, {1});
  return alias;
}

// Model unit m (0 = embedding, 1..L = blocks, L + 1 = head) among the units the model holds (under pipeline stages,
// only its chunks'; GPT::units lists those).
const ModelUnit& held_model_unit(const std::vector<ModelUnit>& held, int m, int n_layers) {
  const std::string name = model_unit_name(m, n_layers);
  for (const ModelUnit& unit : held)
    if (unit.name == name) return unit;
  throw std::logic_error("build_flat_units: model unit " + name + " is not held on this rank");
}

// A unit's name, parameters and layout in the flat buffer, padded to a multiple of F.
FlatUnit describe_unit(const std::vector<ModelUnit>& model_units, const std::vector<int>& group, const Config& config,
                       int64_t F) {
  FlatUnit unit;
  unit.model_units = group;
  const int L = static_cast<int>(config.model.n_layers);
  for (int m : group) {
    const ModelUnit& model_unit = held_model_unit(model_units, m, L);
    unit.name += (unit.name.empty() ? "" : "+") + model_unit.name;
    for (const ParamRef& p : model_unit.params) {
      unit.params.push_back(p);
      unit.shapes.push_back(p.tensor->sizes().vec());
      unit.offsets.push_back(unit.numel);
      unit.decay.push_back(!p.is_norm_or_embedding || config.train.decay_norms_and_embeddings);
      unit.numel += p.tensor->numel();
    }
  }
  unit.padded = (unit.numel + F - 1) / F * F;
  unit.shard_numel = unit.padded / F;
  return unit;
}

// The gathered parameters and gradients, the master shard and its gradient. Memory categories as state_bytes()
// counts them: what a rank keeps (params, grads) or works in (buffers).
void allocate_params_and_grads(FlatUnit& unit, const ShardingTraits& t, const ShardedPrecision& precision,
                               int shard_rank) {
  const auto options = precision.compute_side(at::kFloat);
  // The initial flat parameters (identical on every rank: same seed), padded with zeros.
  at::Tensor initial = at::zeros({unit.padded}, options);
  for (size_t i = 0; i < unit.params.size(); ++i)
    initial.narrow(0, unit.offsets[i], unit.params[i].tensor->numel())
        .copy_(unit.params[i].tensor->detach().reshape({-1}));

  const auto compute = options.dtype(precision.compute);
  {
    MemoryScope held(t.params_persist() ? MemoryCategory::params : MemoryCategory::buffers);
    unit.full = at::zeros({unit.padded}, compute);
  }
  unit.full_writer = storage_alias(unit.full);
  {
    MemoryScope held(t.params_persist() ? MemoryCategory::grads : MemoryCategory::buffers);
    unit.full_grad = at::zeros({unit.padded}, compute);
  }
  const at::Tensor my_chunk = initial.narrow(0, shard_rank * unit.shard_numel, unit.shard_numel);
  if (t.params_persist()) {
    unit.full_writer.copy_(initial);
    unit.params_ready = true;
  }
  if (t.params_persist() && !precision.separate_compute_copy()) {
    // The master shard is this rank's chunk of the persistent flat parameters.
    unit.shard = unit.full_writer.narrow(0, shard_rank * unit.shard_numel, unit.shard_numel);
  } else {
    MemoryScope held(MemoryCategory::params);
    const HostMemoryScope host(precision.offload);
    unit.shard = at::empty({unit.shard_numel}, precision.master_side(precision.master));
    unit.shard.copy_(my_chunk);
  }
  if (t.all_reduces_grads() && !precision.separate_compute_copy() && precision.reduce == at::kFloat) {
    unit.shard_grad = unit.full_grad;  // F = 1: the all-reduced gradient is the shard's gradient
  } else {
    MemoryScope held(t.params_persist() ? MemoryCategory::buffers : MemoryCategory::grads);
    const HostMemoryScope host(precision.offload);
    unit.shard_grad = at::zeros({unit.shard_numel}, precision.master_side(at::kFloat));  // fp32: they accumulate
  }
}

// Working buffers (compute copy, wire copies, reduce-scatter output, fp32 scratch), then the model's parameters
// rebound to views of `full` and their .grad to views of `full_grad`.
void allocate_buffers_and_bind(FlatUnit& unit, const ShardingTraits& t, const ShardedPrecision& precision) {
  const auto options = precision.compute_side(at::kFloat);
  const auto compute = options.dtype(precision.compute);
  MemoryScope buffers(MemoryCategory::buffers);
  if (precision.separate_compute_copy()) unit.compute_shard = at::empty({unit.shard_numel}, compute);
  if (precision.reduce != precision.compute) {
    unit.reduce_in = at::empty({unit.padded}, options.dtype(precision.reduce));
    // A reduce-scatter's wire copy lives from its copy until the reduce-scatter is finished (schedule.cpp); an
    // all-reduce's (no_shard) until after backward, every unit's at once: kept.
    if (t.reduce_scatters_grads()) release_storage(unit.reduce_in);
  }
  if (t.reduce_scatters_grads())  // no_shard all-reduces in place: no reduce-scatter output
    unit.reduce_out = at::empty({unit.shard_numel}, options.dtype(precision.reduce));
  if (precision.master != at::kFloat) {
    const HostMemoryScope host(precision.offload);
    unit.master_scratch = at::zeros({unit.shard_numel}, precision.master_side(at::kFloat));  // released after the
                                                                                             // optimizer is built
  }

  for (size_t i = 0; i < unit.params.size(); ++i) {
    const int64_t n = numel_of(unit.shapes[i]);
    at::Tensor view = unit.full.narrow(0, unit.offsets[i], n).view(unit.shapes[i]);
    view.requires_grad_(true);
    view.mutable_grad() = unit.full_grad.narrow(0, unit.offsets[i], n).view(unit.shapes[i]);
    *unit.params[i].tensor = view;
    unit.views.push_back(view);
  }
  if (!t.params_persist()) {  // views exist now (slicing checks storage bounds); drop the bytes until needed
    release_storage(unit.full);
    release_storage(unit.full_grad);
  }
}

}  // namespace

std::vector<FlatUnit> build_flat_units(GPT& model, const Config& config, ShardingMode mode,
                                       const ShardedPrecision& precision, int shard_group_size, int shard_rank,
                                       const std::vector<std::vector<int>>& chunks) {
  const ShardingTraits t = traits(mode);
  auto model_units = model.units();
  const int L = static_cast<int>(model.config().n_layers);
  std::vector<FlatUnit> units;
  for (const auto& group : held_unit_groups(config.parallel.wrap, L, chunks)) {
    FlatUnit unit = describe_unit(model_units, group, config, shard_group_size);
    unit.chunk = chunk_holding(chunks, group.front());
    allocate_params_and_grads(unit, t, precision, shard_rank);
    allocate_buffers_and_bind(unit, t, precision);
    units.push_back(std::move(unit));
  }
  return units;
}

std::vector<std::pair<int64_t, int64_t>> counted_shard_ranges(const FlatUnit& unit, int shard_rank) {
  const int64_t begin = static_cast<int64_t>(shard_rank) * unit.shard_numel, end = begin + unit.shard_numel;
  bool all_counted = true;
  for (const ParamRef& p : unit.params) all_counted = all_counted && p.counted_in_norm;
  if (all_counted) return {{0, unit.shard_numel}};
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = 0; i < unit.params.size(); ++i) {
    if (!unit.params[i].counted_in_norm) continue;
    const int64_t lo = std::max(begin, unit.offsets[i]);
    const int64_t hi = std::min(end, unit.offsets[i] + numel_of(unit.shapes[i]));
    if (lo >= hi) continue;
    if (!ranges.empty() && ranges.back().second == lo - begin)
      ranges.back().second = hi - begin;  // adjacent to the previous one: one range
    else
      ranges.emplace_back(lo - begin, hi - begin);
  }
  return ranges;
}

}  // namespace dtlab
