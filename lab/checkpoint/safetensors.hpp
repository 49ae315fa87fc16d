// safetensors.hpp: reading and writing safetensors files (torch-free), the tensor format of dtlab checkpoints.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of JSON, then the tensors' raw
// little-endian bytes. The JSON maps each tensor's key to {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}
// (offsets into the data section, which the tensors tile in order, with no gaps) and may hold "__metadata__", a
// string-to-string map. The `safetensors` Python package (and so PyTorch users) open these files directly.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab::safetensors {

// A file that is not a well-formed safetensors file, or cannot be read or written. The message names the file.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TensorToWrite {
  std::string key;
  std::string dtype;  // safetensors spelling: F32 BF16 F16 F64 I64 I32 U8
  std::vector<int64_t> shape;
  const void* data = nullptr;  // little-endian bytes, nbytes = product(shape) * dtype_size(dtype)
};

struct StoredTensor {
  std::string key;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte offsets into the data section
};

struct Header {
  std::string path;
  std::map<std::string, std::string> metadata;               // "__metadata__"
  std::vector<StoredTensor> tensors;                         // in data order
  int64_t data_start = 0;                                    // file offset of the data section
  const StoredTensor& tensor(const std::string& key) const;  // throws FileError naming the file and the key
};

// Bytes per element of a safetensors dtype; throws std::invalid_argument for an unknown one.
int64_t dtype_size(const std::string& dtype);

// Writes the file through `path`.tmp, fsync and rename: a crash leaves the old file or none, never half a file.
void write_file(const std::string& path, const std::vector<TensorToWrite>& tensors,
                const std::map<std::string, std::string>& metadata);

// Parses and checks the header against the file: the JSON, every dtype and shape, offsets that tile the data
// section and end where the file ends (a truncated file is named as such).
Header read_header(const std::string& path);

// The raw bytes of one tensor (`end - begin` bytes).
std::vector<char> read_bytes(const Header& header, const StoredTensor& tensor);

// CRC-32 (zlib's) of a byte range: the checksum dtlab checkpoints record per stored piece.
uint32_t crc32_of(const void* data, int64_t nbytes);

}  // namespace dtlab::safetensors
