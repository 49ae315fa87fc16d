// checkpoint_model.hpp: what one training checkpoint costs (docs/checkpointing.md), torch-free. Bytes are exact:
// the state is the master parameters and the optimizer state, and which rank writes what follows from the strategy's
// cost plan (strategies/cost_plan.hpp). A rank holding a 1/k slice of the optimizer state holds the same slice of the
// masters, and only the first of k ranks holding the same slice writes it. Time is the total over the disk's
// measured write rate (profile key disk_write_GBps, `dtlab calibrate`): every rank writes to the one local disk.
//   CheckpointPrediction c = predict_checkpoint(config, profile.disk_write_GBps);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lab/config.hpp"

namespace dtlab::analysis {

struct CheckpointPrediction {
  std::vector<int64_t> bytes_per_rank;  // training-state bytes each rank writes (RNG rows and file headers excluded)
  int64_t total_bytes = 0;
  int writers = 0;                 // ranks that write (the others hold copies)
  std::optional<double> write_ms;  // total_bytes at the disk rate; nullopt without one
  std::vector<std::string> notes;
};

// REQUIRES: a validated config (config.world_size ranks) of a strategy with a cost plan.
CheckpointPrediction predict_checkpoint(const dtlab::Config& config, std::optional<double> disk_write_GBps);

}  // namespace dtlab::analysis
