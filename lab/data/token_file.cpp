// token_file.cpp: the token file format (lab/data/token_file.hpp): validated memory-mapped reads, and writes through
// the lab's atomic writer (lab/atomic_file.hpp).
#include "lab/data/token_file.hpp"

#include <fcntl.h>     // defines: open, O_RDONLY
#include <sys/mman.h>  // defines: mmap, munmap
#include <sys/stat.h>  // defines: fstat
#include <unistd.h>    // defines: close

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

#include "lab/atomic_file.hpp"

namespace dtlab {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and read/written with memcpy: port the (de)serialisation first");

constexpr char kMagic[8] = {'D', 'T', 'L', 'A', 'B', 'T', 'O', 'K'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kHeaderBytes = 32;

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

}  // namespace

void throw_data_error(const std::string& path, const std::string& rule) {
  throw DataError("data: " + path + ": " + rule);
}

// --- reading

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
  if (fd_ < 0) {
    const int error_number = errno;
    throw_data_error(path_, "cannot open token file: " + errno_text(error_number) +
                                (error_number == ENOENT ? "; build it with 'dtlab data build --out " + path_ +
                                                              " [TEXT_FILE ...]' (no files: Debian's license texts), "
                                                              "or set data.source=synthetic"
                                                        : std::string()));
  }
  struct stat file_stat {};
  if (::fstat(fd_, &file_stat) != 0) throw_data_error(path_, "cannot stat token file: " + errno_text(errno));
  if (!S_ISREG(file_stat.st_mode))
    throw_data_error(path_, "not a regular file; expected a token file (" + std::string(kBuildTokenFileHint) + ")");
  const auto file_bytes = static_cast<int64_t>(file_stat.st_size);
  if (file_bytes < kHeaderBytes) {
    throw_data_error(path_, "truncated header: file is " + std::to_string(file_bytes) + " bytes, the header alone is " +
                                std::to_string(kHeaderBytes) + "; not a complete dtlab token file — " +
                                kBuildTokenFileHint);
  }
  void* mapping = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_PRIVATE, fd_, 0);
  if (mapping == MAP_FAILED)
    throw_data_error(path_, "mmap of " + std::to_string(file_bytes) + " bytes failed: " + errno_text(errno));
  base_ = static_cast<const uint8_t*>(mapping);
  mapped_bytes_ = static_cast<size_t>(file_bytes);

  if (std::memcmp(base_, kMagic, sizeof kMagic) != 0) {
    throw_data_error(path_, "wrong magic '" + printable_bytes(base_, sizeof kMagic) + "' (expected '" +
                                std::string(kMagic, sizeof kMagic) + "'); not a dtlab token file — " +
                                kBuildTokenFileHint);
  }
  const auto version = load<uint32_t>(base_ + 8);
  if (version != kVersion) {
    throw_data_error(path_, "unsupported version " + std::to_string(version) + " (supported versions: " +
                                std::to_string(kVersion) + "); rebuild it with 'dtlab data build'");
  }
  const auto dtype_code = load<uint32_t>(base_ + 12);
  if (dtype_code != 1 && dtype_code != 2 && dtype_code != 4) {
    throw_data_error(path_, "bad dtype code " + std::to_string(dtype_code) +
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
    throw_data_error(
        path_, std::string("size mismatch (") + (too_short ? "truncated body" : "extra bytes after the tokens") +
                   "): header says " + std::to_string(count) + " tokens of " + std::to_string(dtype_code) +
                   " bytes, so expected " + expected_text + " bytes, actual " + std::to_string(file_bytes) + " bytes");
  }
  if (vocab_size < 1 || vocab_size > (uint64_t{1} << 32)) {
    throw_data_error(path_, "vocab size " + std::to_string(vocab_size) + " out of range (must be 1 .. 2^32)");
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
      throw_data_error(path_, "token id " + std::to_string(out[i]) + " at position " + std::to_string(start + i) +
                                  " is >= the header's vocab size " + std::to_string(vocab_size_) +
                                  "; the file is corrupt or its header is wrong (rebuild it with 'dtlab data build')");
}

// --- writing

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > (int64_t{1} << 32)) {
    throw_data_error(path, "vocab_size " + std::to_string(vocab_size) + " out of range (must be 1 .. 2^32)");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (static_cast<int64_t>(tokens[i]) >= vocab_size) {
      throw_data_error(path, "token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                                 " is >= vocab_size " + std::to_string(vocab_size));
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

  // A reader sees the old file or the complete new one, never a partial one (lab/atomic_file.hpp).
  try {
    write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  } catch (const AtomicFileError& e) {
    throw DataError(std::string("data: ") + e.what());
  }
}

}  // namespace dtlab
