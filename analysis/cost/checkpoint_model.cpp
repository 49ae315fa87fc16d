// checkpoint_model.cpp: checkpoint bytes per rank and write time (see checkpoint_model.hpp).
#include "analysis/cost/checkpoint_model.hpp"

#include <algorithm>
#include <cmath>

#include "lab/dtype.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {

CheckpointPrediction predict_checkpoint(const dtlab::Config& config, std::optional<double> disk_write_GBps) {
  CheckpointPrediction out;
  int64_t params = 0;
  for (const ParamShape& p : param_shapes(config.model)) params += p.numel;
  const int64_t master_bytes = bytes_of(dtype_named(config.precision.master_dtype, "precision.master_dtype"));
  const int64_t state_bytes = optimizer_state_bytes_per_element(config.train, 4);  // optimizer state is fp32
  const int64_t per_element = master_bytes + state_bytes;
  out.total_bytes = params * per_element;
  const int world = static_cast<int>(config.world_size);
  out.bytes_per_rank.assign(static_cast<size_t>(world), 0);
  if (state_bytes == 0) {  // no optimizer state to read the layout from: rank 0's share is unknown, say so
    out.bytes_per_rank[0] = out.total_bytes;
    out.writers = 1;
    out.notes.push_back("sgd without momentum keeps no optimizer state: the split over ranks is not predicted");
  } else {
    // Ranks 0..k-1 hold different slices (k = the full state over rank 0's slice); the rest repeat them.
    const int64_t rank0_elements = cost_plan(config, 0).state.optimizer / state_bytes;
    const int k = rank0_elements > 0 ? static_cast<int>(std::llround(static_cast<double>(params) / rank0_elements)) : 1;
    out.writers = std::max(1, std::min(world, k));
    for (int r = 0; r < out.writers; ++r)
      out.bytes_per_rank[static_cast<size_t>(r)] =
          (r == 0 ? rank0_elements : cost_plan(config, r).state.optimizer / state_bytes) * per_element;
  }
  if (disk_write_GBps && *disk_write_GBps > 0)
    out.write_ms = static_cast<double>(out.total_bytes) / (*disk_write_GBps * 1e9) * 1e3;
  return out;
}

}  // namespace dtlab::analysis
