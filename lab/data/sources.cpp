// sources.cpp: the token sources (lab/data/sources.hpp): the seeded synthetic grammar and the token file.
#include "lab/data/sources.hpp"

#include <algorithm>
#include <vector>

#include "lab/data/splitmix.hpp"
#include "lab/data/token_file.hpp"

namespace dtlab {
namespace {

using data_random::SplitMix64;
using data_random::stream_seed;

// Synthetic source: a seeded "grammar" of kPhraseCount phrases (token n-grams of 4–12 tokens drawn from a
// small alphabet of the vocabulary). A sequence starts inside a random phrase and, at each phrase end, jumps
// to one of kSuccessorsPerPhrase seeded successors (a Markov chain over phrases); each token is replaced by a
// uniform random one with probability kNoisePerMille/1000. A model first learns the alphabet's unigram
// (ln(vocab) → ~ln(alphabet)), then the within-phrase transitions, so the loss falls clearly in a few dozen
// steps.
class SyntheticSource final : public TokenSource {
 public:
  static constexpr int64_t kPhraseCount = 64;
  static constexpr int64_t kMinPhraseTokens = 4;
  static constexpr int64_t kMaxPhraseTokens = 12;
  static constexpr int64_t kSuccessorsPerPhrase = 3;
  static constexpr int64_t kMaxAlphabet = 64;
  static constexpr uint64_t kNoisePerMille = 30;

  SyntheticSource(int64_t vocab_size, int64_t seed) : vocab_size_(vocab_size), seed_(seed) {
    if (vocab_size < 1)
      throw DataError("data: synthetic source: vocab_size " + std::to_string(vocab_size) + " must be >= 1");
    SplitMix64 rng(stream_seed(seed, 0x7461626c65ULL /* "table" */, 0));
    const int64_t alphabet_size = std::min(vocab_size, kMaxAlphabet);
    std::vector<int64_t> alphabet(alphabet_size);
    for (auto& token : alphabet) token = static_cast<int64_t>(rng.below(vocab_size));
    phrase_begin_.push_back(0);
    for (int64_t p = 0; p < kPhraseCount; ++p) {
      const int64_t length =
          kMinPhraseTokens + static_cast<int64_t>(rng.below(kMaxPhraseTokens - kMinPhraseTokens + 1));
      for (int64_t i = 0; i < length; ++i) phrase_tokens_.push_back(alphabet[rng.below(alphabet_size)]);
      phrase_begin_.push_back(static_cast<int64_t>(phrase_tokens_.size()));
      for (int64_t s = 0; s < kSuccessorsPerPhrase; ++s)
        successors_.push_back(static_cast<int64_t>(rng.below(kPhraseCount)));
    }
  }

  int64_t vocab_size() const override { return vocab_size_; }

  // O(seq_len): one stream per (seed, index), no state shared between calls.
  void sequence(int64_t index, int64_t seq_len, int64_t* out) const override {
    SplitMix64 rng(stream_seed(seed_, 0x73657173ULL /* "seqs" */, static_cast<uint64_t>(index)));
    int64_t phrase = static_cast<int64_t>(rng.below(kPhraseCount));
    int64_t position = phrase_begin_[phrase] + static_cast<int64_t>(rng.below(phrase_length(phrase)));
    for (int64_t i = 0; i <= seq_len; ++i) {
      int64_t token = phrase_tokens_[position];
      if (rng.below(1000) < kNoisePerMille) token = static_cast<int64_t>(rng.below(vocab_size_));
      out[i] = token;
      if (++position == phrase_begin_[phrase + 1]) {
        phrase = successors_[phrase * kSuccessorsPerPhrase + static_cast<int64_t>(rng.below(kSuccessorsPerPhrase))];
        position = phrase_begin_[phrase];
      }
    }
  }

 private:
  int64_t phrase_length(int64_t phrase) const { return phrase_begin_[phrase + 1] - phrase_begin_[phrase]; }

  int64_t vocab_size_;
  int64_t seed_;
  std::vector<int64_t> phrase_tokens_;  // all phrases back to back
  std::vector<int64_t> phrase_begin_;   // phrase p = phrase_tokens_[phrase_begin_[p], phrase_begin_[p+1])
  std::vector<int64_t> successors_;     // phrase p may be followed by successors_[p*k .. p*k+k)
};

// File source: sequence i = seq_len + 1 tokens from offset (i * seq_len) mod (size - seq_len - 1), so
// consecutive sequences tile the file (sharing one boundary token) and wrap around.
class FileSource final : public TokenSource {
 public:
  explicit FileSource(const std::string& path) : file_(path) {}
  int64_t vocab_size() const override { return file_.vocab_size(); }

  void sequence(int64_t index, int64_t seq_len, int64_t* out) const override {
    if (seq_len < 1 || file_.size() < seq_len + 2) {
      throw_data_error(file_.path(), "has " + std::to_string(file_.size()) + " tokens; sequences of seq_len " +
                                         std::to_string(seq_len) +
                                         " need at least seq_len + 2 = " + std::to_string(seq_len + 2) +
                                         " (use a longer file or a smaller model.seq_len)");
    }
    const auto start_range = static_cast<unsigned __int128>(file_.size() - seq_len - 1);
    const auto start = static_cast<int64_t>(
        (static_cast<unsigned __int128>(static_cast<uint64_t>(index)) * static_cast<uint64_t>(seq_len)) % start_range);
    file_.read(start, seq_len + 1, out);
  }

 private:
  TokenFile file_;
};

}  // namespace

std::unique_ptr<TokenSource> make_synthetic_source(int64_t vocab_size, int64_t seed) {
  return std::make_unique<SyntheticSource>(vocab_size, seed);
}

std::unique_ptr<TokenSource> make_file_source(const std::string& path) { return std::make_unique<FileSource>(path); }

std::unique_ptr<TokenSource> make_token_source(const DataConfig& data, int64_t model_vocab_size) {
  if (data.source == "synthetic") return make_synthetic_source(model_vocab_size, data.seed);
  if (data.source != "file") {
    throw DataError("data: data.source='" + data.source + "' is not a source (expected synthetic or file)");
  }
  if (data.path.empty()) {
    throw DataError("data: data.source=file needs data.path (a token file; " + std::string(kBuildTokenFileHint) + ")");
  }
  auto source = make_file_source(data.path);
  if (source->vocab_size() > model_vocab_size) {
    throw_data_error(data.path, "the file's vocab size " + std::to_string(source->vocab_size()) +
                                    " exceeds model.vocab_size=" + std::to_string(model_vocab_size) +
                                    "; set model.vocab_size >= " + std::to_string(source->vocab_size()) +
                                    " or choose another data.path");
  }
  return source;
}

}  // namespace dtlab
