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

 private:
  std::vector<FlatUnit>& units_;
  ShardedPrecision precision_;
  bool stochastic_rounding_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<at::Tensor> grads_;
};

}  // namespace dtlab
