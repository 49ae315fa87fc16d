// safetensors.cpp: the safetensors reader and writer (see safetensors.hpp).
#include "lab/checkpoint/safetensors.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "lab/atomic_file.hpp"

namespace dtlab::safetensors {

namespace {

constexpr int64_t kMaxHeaderBytes = 100 * 1024 * 1024;  // the reference implementation's limit

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FileError("safetensors file " + path + ": " + what);
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void write_le64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

const StoredTensor& Header::tensor(const std::string& key) const {
  for (const StoredTensor& t : tensors)
    if (t.key == key) return t;
  fail(path, "holds no tensor '" + key + "'");
}

int64_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes = {{"F64", 8}, {"F32", 4}, {"BF16", 2}, {"F16", 2},
                                                       {"I64", 8}, {"I32", 4}, {"U8", 1},   {"I8", 1}};
  const auto it = sizes.find(dtype);
  if (it == sizes.end()) throw std::invalid_argument("safetensors: unknown dtype '" + dtype + "'");
  return it->second;
}

void write_file(const std::string& path, const std::vector<TensorToWrite>& tensors,
                const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const int64_t nbytes = elements(t.shape) * dtype_size(t.dtype);
    header[t.key] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // the data section starts 8-byte aligned
  std::string prefix;
  write_le64(prefix, text.size());

  try {  // a crash mid-write leaves no file that looks whole (lab/atomic_file.hpp)
    AtomicFile out(path);
    out.write(prefix.data(), static_cast<int64_t>(prefix.size()));
    out.write(text.data(), static_cast<int64_t>(text.size()));
    for (const TensorToWrite& t : tensors) out.write(t.data, elements(t.shape) * dtype_size(t.dtype));
    out.commit();
  } catch (const AtomicFileError& e) {
    throw FileError(std::string("safetensors file ") + e.what());
  }
}

Header read_header(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a file");
  const auto file_size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) fail(path, "cannot be read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot be opened");
  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8))
    fail(path, "is truncated: " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > static_cast<uint64_t>(kMaxHeaderBytes) || static_cast<int64_t>(n) > file_size - 8)
    fail(path, "is truncated or not safetensors: header length " + std::to_string(n) + " with " +
                   std::to_string(file_size) + " bytes in the file");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "header is not a JSON object");
  Header h;
  h.path = path;
  h.data_start = 8 + static_cast<int64_t>(n);
  try {
    for (const auto& [key, value] : j.items()) {
      if (key == "__metadata__") {
        for (const auto& [k, v] : value.items()) h.metadata[k] = v.get<std::string>();
        continue;
      }
      StoredTensor t;
      t.key = key;
      t.dtype = value.at("dtype").get<std::string>();
      t.shape = value.at("shape").get<std::vector<int64_t>>();
      const auto offsets = value.at("data_offsets").get<std::vector<int64_t>>();
      if (offsets.size() != 2) fail(path, "tensor '" + key + "': data_offsets must be [begin, end]");
      t.begin = offsets[0];
      t.end = offsets[1];
      if (t.end - t.begin != elements(t.shape) * dtype_size(t.dtype))
        fail(path, "tensor '" + key + "': data_offsets hold " + std::to_string(t.end - t.begin) + " bytes, its " +
                       t.dtype + " shape needs " + std::to_string(elements(t.shape) * dtype_size(t.dtype)));
      h.tensors.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("malformed header: ") + e.what());
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const StoredTensor& a, const StoredTensor& b) { return a.begin < b.begin; });
  int64_t expected = 0;
  for (const StoredTensor& t : h.tensors) {
    if (t.begin != expected)
      fail(path, "tensor '" + t.key + "' starts at byte " + std::to_string(t.begin) + " of the data, expected " +
                     std::to_string(expected) + " (tensors must tile the data section)");
    expected = t.end;
  }
  if (h.data_start + expected != file_size)
    fail(path, (h.data_start + expected > file_size ? "is truncated: " : "has trailing bytes: ") +
                   std::to_string(file_size) + " bytes, its header describes " +
                   std::to_string(h.data_start + expected));
  return h;
}

std::vector<char> read_bytes(const Header& header, const StoredTensor& tensor) {
  std::ifstream in(header.path, std::ios::binary);
  std::vector<char> out(static_cast<size_t>(tensor.end - tensor.begin));
  in.seekg(header.data_start + tensor.begin);
  if (!in || !in.read(out.data(), static_cast<std::streamsize>(out.size())))
    fail(header.path, "cannot read tensor '" + tensor.key + "' (file changed or truncated since its header was read)");
  return out;
}

uint32_t crc32_of(const void* data, int64_t nbytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (nbytes > 0) {
    const auto chunk = static_cast<uInt>(std::min<int64_t>(nbytes, std::numeric_limits<uInt>::max()));
    crc = ::crc32(crc, p, chunk);
    p += chunk;
    nbytes -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace dtlab::safetensors
