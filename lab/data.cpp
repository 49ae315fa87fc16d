// data.cpp: the data layer behind lab/data.hpp — memory-mapped token files (read + atomic write), the
// byte-level tokenizer, the synthetic and file token sources, and the stateless sampler.
//
// Nothing here touches torch's random generators: the synthetic source and the sampler's shuffle use their
// own splitmix64 streams, so the data never perturbs model initialisation or dropout.
#include "lab/data.hpp"

#include <ATen/ATen.h>  // defines: at::empty, at::kLong (building Batch tensors)
#include <fcntl.h>      // defines: open, O_RDONLY
#include <sys/mman.h>   // defines: mmap, munmap
#include <sys/stat.h>   // defines: fstat
#include <unistd.h>     // defines: close, read, write, fsync

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

namespace dtlab {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and read/written with memcpy: port the (de)serialisation first");

constexpr char kMagic[8] = {'D', 'T', 'L', 'A', 'B', 'T', 'O', 'K'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kHeaderBytes = 32;
constexpr const char* kBuildHint = "build one with 'dtlab data build'";

[[noreturn]] void fail(const std::string& path, const std::string& rule) {
  throw DataError("data: " + path + ": " + rule);
}

std::string errno_text(int error_number) { return std::strerror(error_number); }

// The 8 magic bytes as readable text: printable ASCII as is, anything else as \xNN.
std::string printable_bytes(const uint8_t* bytes, size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      text += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      text += escaped;
    }
  }
  return text;
}

template <typename T>
T load(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// splitmix64: the data layer's only randomness. mix64 is its finaliser, a bijection on 64 bits.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, n) by multiply-high (bias < n / 2^64, irrelevant here). REQUIRES: n >= 1.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

// Independent stream per (seed, salt, index): different salts keep the grammar table, the sequences and the
// shuffle from sharing draws.
uint64_t stream_seed(int64_t seed, uint64_t salt, uint64_t index) {
  return mix64(mix64(static_cast<uint64_t>(seed) ^ salt) + mix64(index + 0x632be59bd9b4e019ULL));
}

// ---------------------------------------------------------------------------------------------------------
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
      fail(file_.path(), "has " + std::to_string(file_.size()) + " tokens; sequences of seq_len " +
                             std::to_string(seq_len) + " need at least seq_len + 2 = " + std::to_string(seq_len + 2) +
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

// Reads a whole file; DataError naming it (and the OS reason) if it cannot.
std::string read_text_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("data: cannot read text file '" + path + "': " + errno_text(errno));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error_number = errno;
      ::close(fd);
      throw DataError("data: cannot read text file '" + path + "': " + errno_text(error_number));
    }
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

void write_all(int fd, const uint8_t* bytes, size_t n, const std::string& tmp_path) {
  while (n > 0) {
    const ssize_t put = ::write(fd, bytes, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      fail(tmp_path, "write failed: " + errno_text(errno));
    }
    bytes += put;
    n -= static_cast<size_t>(put);
  }
}

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

// ---------------------------------------------------------------------------------------------------------
// TokenFile

TokenFile::TokenFile(const std::string& path) : path_(path) {
  try {
    open_and_validate();
  } catch (...) {
    release();
    throw;
  }
}

TokenFile::~TokenFile() { release(); }

TokenFile::TokenFile(TokenFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      count_(std::exchange(other.count_, 0)),
      vocab_size_(std::exchange(other.vocab_size_, 0)),
      bytes_per_token_(std::exchange(other.bytes_per_token_, 1)) {}

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    base_ = std::exchange(other.base_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    count_ = std::exchange(other.count_, 0);
    vocab_size_ = std::exchange(other.vocab_size_, 0);
    bytes_per_token_ = std::exchange(other.bytes_per_token_, 1);
  }
  return *this;
}

void TokenFile::release() noexcept {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), mapped_bytes_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  mapped_bytes_ = 0;
  fd_ = -1;
  count_ = 0;
}

void TokenFile::open_and_validate() {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path_, "cannot open token file: " + errno_text(errno));
  struct stat file_stat {};
  if (::fstat(fd_, &file_stat) != 0) fail(path_, "cannot stat token file: " + errno_text(errno));
  if (!S_ISREG(file_stat.st_mode))
    fail(path_, "not a regular file; expected a token file (" + std::string(kBuildHint) + ")");
  const auto file_bytes = static_cast<int64_t>(file_stat.st_size);
  if (file_bytes < kHeaderBytes) {
    fail(path_, "truncated header: file is " + std::to_string(file_bytes) + " bytes, the header alone is " +
                    std::to_string(kHeaderBytes) + "; not a complete dtlab token file — " + kBuildHint);
  }
  void* mapping = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_PRIVATE, fd_, 0);
  if (mapping == MAP_FAILED)
    fail(path_, "mmap of " + std::to_string(file_bytes) + " bytes failed: " + errno_text(errno));
  base_ = static_cast<const uint8_t*>(mapping);
  mapped_bytes_ = static_cast<size_t>(file_bytes);

  if (std::memcmp(base_, kMagic, sizeof kMagic) != 0) {
    fail(path_, "wrong magic '" + printable_bytes(base_, sizeof kMagic) + "' (expected '" +
                    std::string(kMagic, sizeof kMagic) + "'); not a dtlab token file — " + kBuildHint);
  }
  const auto version = load<uint32_t>(base_ + 8);
  if (version != kVersion) {
    fail(path_, "unsupported version " + std::to_string(version) + " (supported versions: " + std::to_string(kVersion) +
                    "); rebuild it with 'dtlab data build'");
  }
  const auto dtype_code = load<uint32_t>(base_ + 12);
  if (dtype_code != 1 && dtype_code != 2 && dtype_code != 4) {
    fail(path_, "bad dtype code " + std::to_string(dtype_code) +
                    " (expected bytes per token: 1 = uint8, 2 = uint16, 4 = uint32)");
  }
  const auto count = load<uint64_t>(base_ + 16);
  const auto vocab_size = load<uint64_t>(base_ + 24);
  const unsigned __int128 expected_bytes = kHeaderBytes + static_cast<unsigned __int128>(count) * dtype_code;
  if (expected_bytes != static_cast<unsigned __int128>(file_bytes)) {
    const bool too_short = expected_bytes > static_cast<unsigned __int128>(file_bytes);
    const std::string expected_text = expected_bytes > std::numeric_limits<uint64_t>::max()
                                          ? std::string("> 2^64")
                                          : std::to_string(static_cast<uint64_t>(expected_bytes));
    fail(path_, std::string("size mismatch (") + (too_short ? "truncated body" : "extra bytes after the tokens") +
                    "): header says " + std::to_string(count) + " tokens of " + std::to_string(dtype_code) +
                    " bytes, so expected " + expected_text + " bytes, actual " + std::to_string(file_bytes) + " bytes");
  }
  if (vocab_size < 1 || vocab_size > (uint64_t{1} << 32)) {
    fail(path_, "vocab size " + std::to_string(vocab_size) + " out of range (must be 1 .. 2^32)");
  }
  count_ = static_cast<int64_t>(count);
  vocab_size_ = static_cast<int64_t>(vocab_size);
  bytes_per_token_ = static_cast<int>(dtype_code);
}

int64_t TokenFile::token(int64_t i) const {
  const uint8_t* at = base_ + kHeaderBytes + i * bytes_per_token_;
  switch (bytes_per_token_) {
    case 1:
      return *at;
    case 2:
      return load<uint16_t>(at);
    default:
      return load<uint32_t>(at);
  }
}

void TokenFile::read(int64_t start, int64_t n, int64_t* out) const {
  const uint8_t* at = base_ + kHeaderBytes + start * bytes_per_token_;
  switch (bytes_per_token_) {
    case 1:
      for (int64_t i = 0; i < n; ++i) out[i] = at[i];
      break;
    case 2:
      for (int64_t i = 0; i < n; ++i) out[i] = load<uint16_t>(at + 2 * i);
      break;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = load<uint32_t>(at + 4 * i);
      break;
  }
  // The header's vocab bounds every id; checked as sequences are read (opening a large file stays O(1)).
  for (int64_t i = 0; i < n; ++i)
    if (out[i] >= vocab_size_)
      fail(path_, "token id " + std::to_string(out[i]) + " at position " + std::to_string(start + i) +
                      " is >= the header's vocab size " + std::to_string(vocab_size_) +
                      "; the file is corrupt or its header is wrong (rebuild it with 'dtlab data build')");
}

// ---------------------------------------------------------------------------------------------------------
// Writing and building token files

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > (int64_t{1} << 32)) {
    fail(path, "vocab_size " + std::to_string(vocab_size) + " out of range (must be 1 .. 2^32)");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (static_cast<int64_t>(tokens[i]) >= vocab_size) {
      fail(path, "token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) + " is >= vocab_size " +
                     std::to_string(vocab_size));
    }
  }
  // Smallest dtype that holds every id below vocab_size.
  const uint32_t bytes_per_token = vocab_size <= 256 ? 1 : vocab_size <= 65536 ? 2 : 4;

  std::vector<uint8_t> bytes(static_cast<size_t>(kHeaderBytes) + tokens.size() * bytes_per_token);
  std::memcpy(bytes.data(), kMagic, sizeof kMagic);
  const uint32_t version = kVersion;
  const uint64_t count = tokens.size();
  const auto vocab = static_cast<uint64_t>(vocab_size);
  std::memcpy(bytes.data() + 8, &version, 4);
  std::memcpy(bytes.data() + 12, &bytes_per_token, 4);
  std::memcpy(bytes.data() + 16, &count, 8);
  std::memcpy(bytes.data() + 24, &vocab, 8);
  uint8_t* body = bytes.data() + kHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (bytes_per_token == 1) {
      body[i] = static_cast<uint8_t>(tokens[i]);
    } else if (bytes_per_token == 2) {
      const auto value = static_cast<uint16_t>(tokens[i]);
      std::memcpy(body + 2 * i, &value, 2);
    } else {
      std::memcpy(body + 4 * i, &tokens[i], 4);
    }
  }

  // tmp → fsync → rename → fsync(dir): a reader sees the old file or the complete new one, never a partial one.
  const std::string tmp_path = path + ".tmp";
  const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(tmp_path, "cannot create: " + errno_text(errno));
  try {
    write_all(fd, bytes.data(), bytes.size(), tmp_path);
    if (::fsync(fd) != 0) fail(tmp_path, "fsync failed: " + errno_text(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp_path.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int error_number = errno;
    ::unlink(tmp_path.c_str());
    fail(tmp_path, "close failed: " + errno_text(error_number));
  }
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(tmp_path.c_str());
    fail(path, "rename from " + tmp_path + " failed: " + errno_text(error_number));
  }
  std::string directory = std::filesystem::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {  // best effort: durability of the rename itself
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

std::vector<uint32_t> tokenize_bytes(const std::string& text) {
  std::vector<uint32_t> tokens;
  tokens.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte != 0) tokens.push_back(byte);  // NUL is reserved as the document separator
  }
  return tokens;
}

int64_t build_token_file_from_text(const std::vector<std::string>& text_paths, const std::string& out_path) {
  if (text_paths.empty()) fail(out_path, "no text files given to build it from");
  std::vector<uint32_t> tokens;
  for (size_t i = 0; i < text_paths.size(); ++i) {
    if (i > 0) tokens.push_back(0);  // document separator
    const std::vector<uint32_t> document = tokenize_bytes(read_text_file(text_paths[i]));
    tokens.insert(tokens.end(), document.begin(), document.end());
  }
  write_token_file(out_path, tokens, 256);
  return static_cast<int64_t>(tokens.size());
}

std::vector<std::string> default_corpus_files() {
  namespace fs = std::filesystem;
  const fs::path directory = "/usr/share/common-licenses";
  std::error_code error;
  std::vector<fs::path> names;
  for (const auto& entry : fs::directory_iterator(directory, error)) names.push_back(entry.path());
  std::sort(names.begin(), names.end());

  // Regular files first, then symlinks whose target is not already listed (GPL -> GPL-3 is a duplicate).
  std::set<fs::path> listed_targets;
  std::vector<std::string> files;
  for (const bool symlinks : {false, true}) {
    for (const auto& name : names) {
      if (fs::is_symlink(name, error) != symlinks) continue;
      if (!fs::is_regular_file(name, error)) continue;  // follows symlinks
      if (::access(name.c_str(), R_OK) != 0) continue;
      const fs::path target = fs::canonical(name, error);
      if (error || !listed_targets.insert(target).second) continue;
      files.push_back(name.string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// ---------------------------------------------------------------------------------------------------------
// Sources

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
    throw DataError("data: data.source=file needs data.path (a token file; " + std::string(kBuildHint) + ")");
  }
  auto source = make_file_source(data.path);
  if (source->vocab_size() > model_vocab_size) {
    fail(data.path, "the file's vocab size " + std::to_string(source->vocab_size()) +
                        " exceeds model.vocab_size=" + std::to_string(model_vocab_size) + "; set model.vocab_size >= " +
                        std::to_string(source->vocab_size()) + " or choose another data.path");
  }
  return source;
}

// ---------------------------------------------------------------------------------------------------------
// Sampler

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
