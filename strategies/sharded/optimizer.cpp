// optimizer.cpp: the sharded optimizer step with bf16 masters and offload (see optimizer.hpp).
#include "strategies/sharded/optimizer.hpp"

#include <algorithm>

#include "lab/device.hpp"
#include "lab/memory.hpp"

namespace dtlab {

ShardedOptimizer::ShardedOptimizer(const Config& config, std::vector<FlatUnit>& units, int shard_rank,
                                   const ShardedPrecision& precision)
    : units_(units), precision_(precision), stochastic_rounding_(config.precision.stochastic_rounding) {
  const HostMemoryScope host(precision_.offload);  // offloaded optimizer state lives in host buffers
  std::vector<at::Tensor> params;
  std::vector<bool> decay;
  for (size_t u = 0; u < units_.size(); ++u) {
    FlatUnit& unit = units_[u];
    const int64_t begin = shard_rank * unit.shard_numel, end = begin + unit.shard_numel;
    for (size_t i = 0; i < unit.params.size(); ++i) {
      const int64_t a = std::max(begin, unit.offsets[i]);
      const int64_t b = std::min(end, unit.offsets[i] + numel_of(unit.shapes[i]));
      if (a >= b) continue;
      const at::Tensor& updated = precision_.master == at::kFloat ? unit.shard : unit.master_scratch;
      params.push_back(updated.narrow(0, a - begin, b - a));
      grads_.push_back(unit.shard_grad.narrow(0, a - begin, b - a));
      decay.push_back(unit.decay[i]);
      slots_.push_back(
          {.unit = u, .param = i, .shard_offset = a - begin, .param_offset = a - unit.offsets[i], .numel = b - a});
    }
  }
  optimizer_ = make_optimizer(config.train, std::move(params), std::move(decay));
  for (auto& unit : units_)  // the optimizer's views of the scratch exist now: hold its bytes only during steps
    if (unit.master_scratch.defined()) release_storage(unit.master_scratch);
}

void ShardedOptimizer::step(double lr, int64_t step, int rank) {
  const HostMemoryScope host(precision_.offload);  // offloaded: the step runs on the host, in host memory
  if (precision_.master != at::kFloat) {           // step in fp32 on a scratch copy, round back to the bf16 master
    for (auto& unit : units_) {
      ensure_storage(unit.master_scratch, unit.shard_numel * 4);
      unit.master_scratch.copy_(unit.shard);
    }
  }
  optimizer_->step(grads_, lr);
  if (precision_.master == at::kFloat) return;
  for (size_t u = 0; u < units_.size(); ++u) {
    FlatUnit& unit = units_[u];
    const uint64_t seed =
        (static_cast<uint64_t>(step) << 20) ^ (static_cast<uint64_t>(u) << 8) ^ static_cast<uint64_t>(rank);
    if (stochastic_rounding_) {
      stochastic_round_to_bf16(unit.master_scratch, unit.shard, seed);  // the CUDA kernel for device masters
    } else {
      unit.shard.copy_(unit.master_scratch);
    }
    release_storage(unit.master_scratch);
  }
}

}  // namespace dtlab
