// tensorboard.cpp: TFRecord framing and the protobuf wire format of tensorflow.Event (see tensorboard.hpp).
#include "lab/instrument/tensorboard.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <type_traits>

namespace dtlab {

namespace {

// The crc32c lookup table, built once: entry i is the CRC of the byte i.
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1U) ? 0x82F63B78U ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protobuf wire format: varints, field keys (field number << 3 | wire type), fixed-width little-endian numbers.
constexpr int kWireVarint = 0, kWireFixed64 = 1, kWireLengthDelimited = 2, kWireFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

template <typename T>
void put_little_endian(std::string& out, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64 Linux are little-endian, as TFRecord is
  out.append(bytes, sizeof(T));
}

void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kWireLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// tensorflow.Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5 (Summary).
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, kWireFixed64);
  put_little_endian(e, wall_time);
  put_key(e, 2, kWireVarint);
  put_varint(e, static_cast<uint64_t>(step));
  return e;
}

// tensorflow.Summary { repeated Value value = 1; }, Value { string tag = 1; float simple_value = 2; }.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, double value) {
  std::string v;
  put_bytes_field(v, 1, tag);
  put_key(v, 2, kWireFixed32);
  put_little_endian(v, static_cast<float>(value));
  std::string summary;
  put_bytes_field(summary, 1, v);
  std::string e = event_header(wall_time, step);
  put_bytes_field(e, 5, summary);
  return e;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  const auto& table = crc32c_table();
  uint32_t c = 0xFFFFFFFFU;
  for (const char ch : bytes) c = table[(c ^ static_cast<unsigned char>(ch)) & 0xFFU] ^ (c >> 8);
  return c ^ 0xFFFFFFFFU;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8U;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw TensorBoardError("tensorboard: cannot create " + dir + ": " + ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(unix_seconds_now())) + "." + host + "." +
          std::to_string(getpid());
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw TensorBoardError("tensorboard: cannot write " + path_ + ": " + std::strerror(errno));
  std::string first = event_header(unix_seconds_now(), 0);
  put_bytes_field(first, 3, "brain.Event:2");
  write_record(first);
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  write_record(scalar_event(unix_seconds_now(), step, tag, value));
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0)
    throw TensorBoardError("tensorboard: cannot write " + path_ + ": " + std::strerror(errno));
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string record;
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  record += length;
  put_little_endian(record, masked_crc32c(length));
  record += data;
  put_little_endian(record, masked_crc32c(data));
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw TensorBoardError("tensorboard: cannot write " + path_ + ": " + std::strerror(errno));
}

}  // namespace dtlab
