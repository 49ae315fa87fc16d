// data.hpp: token data for training — the memmap token file, the byte-level tokenizer, a synthetic
// source, and the sampler that hands each rank disjoint, deterministic, resumable batches.
//
// Token file layout (little-endian), version 1:
//   offset 0  char[8]  magic "DTLABTOK"
//   offset 8  uint32   version (1)
//   offset 12 uint32   dtype code (1 = uint8, 2 = uint16, 4 = uint32)  — bytes per token
//   offset 16 uint64   token count
//   offset 24 uint64   vocab size
//   offset 32          tokens (count * bytes per token), nothing after
// Opening validates all of it; a violation throws DataError naming the path and the rule.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "lab/config.hpp"

namespace dtlab {

struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int64_t kIgnoreIndex = -100;  // targets with this value do not count in the loss

// One micro-batch: inputs and next-token targets, both int64 [micro_batch, seq_len].
struct Batch {
  at::Tensor inputs;
  at::Tensor targets;  // kIgnoreIndex where masked
};

// Read-only memory-mapped token file.
class TokenFile {
 public:
  explicit TokenFile(const std::string& path);  // throws DataError
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  TokenFile(TokenFile&& other) noexcept;  // `other` is left empty (size 0, nothing mapped)
  TokenFile& operator=(TokenFile&& other) noexcept;
  int64_t size() const { return count_; }
  int64_t vocab_size() const { return vocab_size_; }
  int bytes_per_token() const { return bytes_per_token_; }
  int64_t token(int64_t i) const;                           // REQUIRES: 0 <= i < size()
  void read(int64_t start, int64_t n, int64_t* out) const;  // REQUIRES: start + n <= size()
  const std::string& path() const { return path_; }

 private:
  void open_and_validate();  // the constructor's body; throws DataError
  void release() noexcept;   // unmaps and closes; safe on an empty or moved-from object

  std::string path_;
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  int64_t count_ = 0;
  int64_t vocab_size_ = 0;
  int bytes_per_token_ = 1;
};

// Writes a token file (tmp file + rename, so a reader never sees a partial one).
void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab_size);

// Byte-level tokenizer: token = byte value (vocab 256). Documents are separated by token 0 (NUL),
// which never occurs in text.
std::vector<uint32_t> tokenize_bytes(const std::string& text);
// `dtlab data build`: concatenates text files (each a document) into a token file. Returns the count.
int64_t build_token_file_from_text(const std::vector<std::string>& text_paths, const std::string& out_path);
// A real English corpus present on every Debian system: the readable license texts in
// /usr/share/common-licenses (GPL-2, GPL-3, Apache-2.0, ...), sorted by name, symlinks to files already in
// the list skipped. Empty if the directory is missing. Feed it to build_token_file_from_text.
std::vector<std::string> default_corpus_files();

// Where sequences come from: a token file or a deterministic synthetic generator.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t vocab_size() const = 0;
  // Fills `out` with seq_len + 1 tokens of sequence number `index` (any index >= 0 is valid;
  // file sources wrap around). Deterministic in (index).
  virtual void sequence(int64_t index, int64_t seq_len, int64_t* out) const = 0;
};
// Synthetic: a learnable stream (a seeded random "grammar" of repeated n-grams plus noise), so the
// loss falls and runs are comparable; deterministic in (seed, index).
std::unique_ptr<TokenSource> make_synthetic_source(int64_t vocab_size, int64_t seed);
std::unique_ptr<TokenSource> make_file_source(const std::string& path);  // throws DataError
// From DataConfig: source == synthetic | file. Checks the file's vocab against model.vocab_size.
std::unique_ptr<TokenSource> make_token_source(const DataConfig& data, int64_t model_vocab_size);

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
