// token_file.hpp: the token file format: a memory-mapped read-only view and an atomic writer.
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
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab {

// Every error of the data layer (token files, corpus, sources, sampler).
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws DataError "data: <path>: <rule>", the form of every error about one file.
[[noreturn]] void throw_data_error(const std::string& path, const std::string& rule);

// What to tell a user who lacks a token file.
inline constexpr const char* kBuildTokenFileHint = "build one with 'dtlab data build'";

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

}  // namespace dtlab
