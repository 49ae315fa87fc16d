// sampler.cpp: the stateless sampler (lab/data/sampler.hpp) and its seeded shuffle.
#include "lab/data/sampler.hpp"

#include <ATen/ATen.h>  // defines: at::empty, at::kLong (building Batch tensors)

#include <algorithm>
#include <string>

#include "lab/data/splitmix.hpp"
#include "lab/data/token_file.hpp"

namespace dtlab {
namespace {

using data_random::mix64;
using data_random::stream_seed;

// Sampler shuffle: a seeded bijection on each block of 2^kShuffleBlockBits consecutive indices (a 4-round
// balanced Feistel network on the low bits; the block number is kept and salts the round keys). Stateless,
// so resuming needs only the step number.
constexpr int kShuffleBlockBits = 20;
constexpr int kShuffleHalfBits = kShuffleBlockBits / 2;
constexpr uint64_t kShuffleHalfMask = (uint64_t{1} << kShuffleHalfBits) - 1;

int64_t shuffle_index(int64_t linear_index, int64_t seed) {
  const auto n = static_cast<uint64_t>(linear_index);
  const uint64_t block = n >> kShuffleBlockBits;
  uint64_t left = (n >> kShuffleHalfBits) & kShuffleHalfMask;
  uint64_t right = n & kShuffleHalfMask;
  for (uint64_t round = 0; round < 4; ++round) {
    const uint64_t key = stream_seed(seed, 0x73687566ULL /* "shuf" */ + round, block);
    const uint64_t mixed = left ^ (mix64(right ^ key) & kShuffleHalfMask);
    left = right;
    right = mixed;
  }
  return static_cast<int64_t>((block << kShuffleBlockBits) | (left << kShuffleHalfBits) | right);
}

}  // namespace

Sampler::Sampler(const TokenSource& source, int64_t seq_len, int64_t global_batch, int64_t micro_batch,
                 int64_t accumulation, int dp_rank, int dp_size, int64_t seed, int64_t mask_token)
    : source_(source),
      seq_len_(seq_len),
      global_batch_(global_batch),
      micro_batch_(micro_batch),
      accumulation_(accumulation),
      dp_rank_(dp_rank),
      dp_size_(dp_size),
      seed_(seed),
      mask_token_(mask_token) {
  auto reject = [](const std::string& rule) { throw DataError("data: sampler: " + rule); };
  if (seq_len < 1) reject("seq_len(" + std::to_string(seq_len) + ") must be >= 1");
  if (micro_batch < 1 || accumulation < 1 || dp_size < 1) {
    reject("micro_batch(" + std::to_string(micro_batch) + "), accumulation(" + std::to_string(accumulation) +
           ") and dp_size(" + std::to_string(dp_size) + ") must all be >= 1");
  }
  if (global_batch != micro_batch * accumulation * dp_size) {
    reject("global_batch(" + std::to_string(global_batch) + ") != micro_batch(" + std::to_string(micro_batch) +
           ") * accumulation(" + std::to_string(accumulation) + ") * dp_size(" + std::to_string(dp_size) + ")");
  }
  if (dp_rank < 0 || dp_rank >= dp_size) {
    reject("dp_rank(" + std::to_string(dp_rank) + ") outside [0, dp_size(" + std::to_string(dp_size) + "))");
  }
  // Fail now, not at step 1, if the source cannot serve this seq_len (e.g. a file that is too short).
  std::vector<int64_t> probe(static_cast<size_t>(seq_len + 1));
  source_.sequence(0, seq_len, probe.data());
}

std::vector<int64_t> Sampler::sequence_indices(int64_t step, int dp_rank, int64_t micro_step) const {
  if (step < 0 || dp_rank < 0 || dp_rank >= dp_size_ || micro_step < 0 || micro_step >= accumulation_) {
    throw DataError("data: sampler: (step " + std::to_string(step) + ", dp_rank " + std::to_string(dp_rank) +
                    ", micro_step " + std::to_string(micro_step) + ") outside step >= 0, dp_rank < " +
                    std::to_string(dp_size_) + ", micro_step < " + std::to_string(accumulation_));
  }
  std::vector<int64_t> indices(static_cast<size_t>(micro_batch_));
  const int64_t first_slot = (dp_rank * accumulation_ + micro_step) * micro_batch_;
  for (int64_t i = 0; i < micro_batch_; ++i) indices[i] = shuffle_index(step * global_batch_ + first_slot + i, seed_);
  return indices;
}

Batch Sampler::batch(int64_t step, int64_t micro_step) const {
  const std::vector<int64_t> indices = sequence_indices(step, dp_rank_, micro_step);
  Batch batch{at::empty({micro_batch_, seq_len_}, at::kLong), at::empty({micro_batch_, seq_len_}, at::kLong)};
  int64_t* inputs = batch.inputs.data_ptr<int64_t>();
  int64_t* targets = batch.targets.data_ptr<int64_t>();
  std::vector<int64_t> tokens(static_cast<size_t>(seq_len_ + 1));
  for (int64_t row = 0; row < micro_batch_; ++row) {
    source_.sequence(indices[row], seq_len_, tokens.data());
    for (int64_t t = 0; t < seq_len_; ++t) {
      inputs[row * seq_len_ + t] = tokens[t];
      const int64_t target = tokens[t + 1];
      targets[row * seq_len_ + t] = (mask_token_ >= 0 && target == mask_token_) ? kIgnoreIndex : target;
    }
  }
  return batch;
}

int64_t Sampler::global_target_count(int64_t step) const {
  if (mask_token_ < 0) return global_batch_ * seq_len_;
  int64_t count = 0;
  std::vector<int64_t> tokens(static_cast<size_t>(seq_len_ + 1));
  for (int dp_rank = 0; dp_rank < dp_size_; ++dp_rank) {
    for (int64_t micro_step = 0; micro_step < accumulation_; ++micro_step) {
      for (const int64_t index : sequence_indices(step, dp_rank, micro_step)) {
        source_.sequence(index, seq_len_, tokens.data());
        count += std::count_if(tokens.begin() + 1, tokens.end(), [&](int64_t t) { return t != mask_token_; });
      }
    }
  }
  return count;
}

}  // namespace dtlab
