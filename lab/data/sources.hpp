// sources.hpp: where training sequences come from: a token file, or a seeded synthetic stream a model can learn.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lab/config.hpp"

namespace dtlab {

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

}  // namespace dtlab
