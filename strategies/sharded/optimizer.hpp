// optimizer.hpp: the sharded optimizer step. Each rank steps only its shard of every flat unit: the optimizer sees,
// per unit, the pieces of the shard that belong to each parameter (padding excluded), so weight decay follows the
// parameter and the update equals the unsharded one. Masters are fp32, or bf16 (precision.master_dtype) stepped on an
// fp32 scratch copy that exists only during the step and is rounded back (stochastically with
// precision.stochastic_rounding). With parallel.offload the shards, their gradients and the optimizer state are host
// buffers; the step runs there and gathers read a compute-side copy (ShardedPrecision::separate_compute_copy).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lab/train/optimizer.hpp"
#include "strategies/sharded/flat_unit.hpp"

namespace dtlab {

class ShardedOptimizer {
 public:
  // `units` outlive the optimizer and keep their addresses; `shard_rank` picks this rank's shard of each unit.
  // Releases the fp32 scratch of a bf16 master once the optimizer's views of it exist.
  ShardedOptimizer(const Config& config, std::vector<FlatUnit>& units, int shard_rank,
                   const ShardedPrecision& precision);

  // One step of every master shard from its gradient shard. `step` and `rank` seed the stochastic rounding.
  void step(double lr, int64_t step, int rank);
  int64_t state_bytes() const { return optimizer_->state_bytes(); }

  // What each of the optimizer's tensors is, in its order: elements [shard_offset, shard_offset + numel) of unit
  // `unit`'s shard, which are elements [param_offset, param_offset + numel) of its parameter `param` (padding is in
  // no slot). Checkpoints name the state by parameter through these.
  struct Slot {
    size_t unit = 0, param = 0;
    int64_t shard_offset = 0, param_offset = 0, numel = 0;
  };
  const std::vector<Slot>& slots() const { return slots_; }
  Optimizer& inner() { return *optimizer_; }
  const Optimizer& inner() const { return *optimizer_; }

 private:
  std::vector<FlatUnit>& units_;
  ShardedPrecision precision_;
  bool stochastic_rounding_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<at::Tensor> grads_;
  std::vector<Slot> slots_;
};

}  // namespace dtlab
