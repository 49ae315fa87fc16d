// max_batch.hpp: `dtlab max-batch` — the largest micro-batch (or sequence length) whose predicted peak per rank fits
// a memory budget under a config's own strategy and settings (torch-free). The budget is the device's, as
// memory.limit is: with parallel.offload the peak compared is the device side (MemoryPrediction::device_peak).
//
//   const auto fit = max_batch(load_config("run.yaml", {}, 2), 96LL << 20);   // fit->value fits, fit->next_value not
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lab/config.hpp"

namespace dtlab::analysis {

// `dtlab max-batch`: the largest micro-batch (accumulation 1, global batch = micro-batch x data-parallel ranks)
// whose predicted peak fits the budget under the base config's strategy and settings, searched up to `limit`
// (peaks grow with the size: doubling, then bisection). With `seq_len` the sequence length is searched instead, the
// batch kept. nullopt when not even the smallest (1, or 2 tokens) fits. Throws ConfigError when the base config is
// invalid.
struct BatchFit {
  int64_t value = 0;            // micro-batch (or seq_len) that fits
  int64_t peak_bytes = 0;       // its predicted peak
  int64_t next_value = 0;       // the next size tried
  int64_t next_peak_bytes = 0;  // its predicted peak (above the budget; 0 when the search limit was reached)
};
std::optional<BatchFit> max_batch(const Config& base, int64_t budget_bytes, bool seq_len = false, int64_t limit = 4096);
// The overrides that set a batch-fit value on a config: micro-batch (train.micro_batch, train.global_batch,
// train.accumulation=0) or seq_len (model.seq_len).
std::vector<std::string> batch_overrides(const Config& base, int64_t value, bool seq_len);

}  // namespace dtlab::analysis
