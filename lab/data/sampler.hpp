// sampler.hpp: the batches of a step: disjoint, deterministic and resumable per data-parallel rank.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

#include "lab/data/sources.hpp"

namespace dtlab {

inline constexpr int64_t kIgnoreIndex = -100;  // targets with this value do not count in the loss

// One micro-batch: inputs and next-token targets, both int64 [micro_batch, seq_len].
struct Batch {
  at::Tensor inputs;
  at::Tensor targets;  // kIgnoreIndex where masked
};

// Sampler: the global batch of step s is sequences [s*global_batch, (s+1)*global_batch) of a
// seeded permutation-free order (sequence index = step*global_batch + slot, shuffled by a seeded
// bijection within each epoch block). Data-parallel rank r, micro-step m gets slots
//   [(r * accumulation + m) * micro_batch, ... + micro_batch),
// so data-parallel ranks are disjoint, the union over them and micro-steps is the global batch, and the
// state is just the step number (resume = construct and seek). The data-parallel rank and size are the
// strategy's (Strategy::layout()): ranks of one tensor- or pipeline-parallel group read the same data.
class Sampler {
 public:
  Sampler(const TokenSource& source, int64_t seq_len, int64_t global_batch, int64_t micro_batch, int64_t accumulation,
          int dp_rank, int dp_size, int64_t seed, int64_t mask_token = -1);
  Batch batch(int64_t step, int64_t micro_step) const;
  // Sequence indices (into the source) of (step, dp_rank, micro_step): for tests and audits.
  std::vector<int64_t> sequence_indices(int64_t step, int dp_rank, int64_t micro_step) const;
  // Non-ignored targets in the whole global batch of `step` (all data-parallel ranks): the loss denominator,
  // computed locally and identically on every rank.
  int64_t global_target_count(int64_t step) const;

 private:
  const TokenSource& source_;
  int64_t seq_len_, global_batch_, micro_batch_, accumulation_;
  int dp_rank_, dp_size_;
  int64_t seed_, mask_token_;
};

}  // namespace dtlab
