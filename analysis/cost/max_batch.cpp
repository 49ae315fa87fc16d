// max_batch.cpp: the largest micro-batch or sequence length under a memory budget (see max_batch.hpp).
#include "analysis/cost/max_batch.hpp"

#include "analysis/cost/memory_model.hpp"
#include "strategies/catalog.hpp"

namespace dtlab::analysis {

std::vector<std::string> batch_overrides(const Config& base, int64_t value, bool seq_len) {
  if (seq_len) return {"model.seq_len=" + std::to_string(value)};
  return {"train.micro_batch=" + std::to_string(value), "train.accumulation=0",
          "train.global_batch=" + std::to_string(value * data_parallel_size(base))};
}

std::optional<BatchFit> max_batch(const Config& base, int64_t budget_bytes, bool seq_len, int64_t limit) {
  const std::string backend = base.parallel.backend == "nccl" ? "nccl" : "gloo";
  auto peak_at = [&](int64_t value) {
    Config c = base;
    if (seq_len) {
      c.model.seq_len = value;
    } else {
      c.train.micro_batch = value;
      c.train.accumulation = 0;
      c.train.global_batch = value * data_parallel_size(base);
    }
    validate(c);
    return largest_rank_peak_memory(c, backend).device_peak;
  };
  const int64_t smallest = seq_len ? 2 : 1;  // a sequence has at least two tokens (one input, one target)
  if (peak_at(smallest) > budget_bytes) return std::nullopt;
  // Peaks grow with the size: double until one does not fit, then bisect between the last two.
  int64_t fits = smallest, over = 2 * smallest;
  while (over <= limit && peak_at(over) <= budget_bytes) {
    fits = over;
    over *= 2;
  }
  if (over > limit) over = limit + 1;
  while (over - fits > 1) {
    const int64_t mid = fits + (over - fits) / 2;
    (peak_at(mid) <= budget_bytes ? fits : over) = mid;
  }
  BatchFit fit;
  fit.value = fits;
  fit.peak_bytes = peak_at(fits);
  fit.next_value = over;
  fit.next_peak_bytes = over <= limit ? peak_at(over) : 0;
  return fit;
}

}  // namespace dtlab::analysis
