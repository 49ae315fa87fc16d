// tensorboard_test.cpp: the TensorBoard event-file writer (lab/instrument/tensorboard.hpp) at the byte level: the
// CRC-32C check value, TFRecord framing whose CRCs verify, the file-version event first, and errors that name the
// path. tests/ecosystem/ reads the same files with TensorBoard's own reader.
#include "lab/instrument/tensorboard.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace dtlab {
namespace {

namespace fs = std::filesystem;

// The TFRecord records of `path`: each length and data, with both masked CRCs checked.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t length = 0;
    uint32_t length_crc = 0, data_crc = 0;
    EXPECT_LE(at + 12, bytes.size());
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&length_crc, bytes.data() + at + 8, 4);
    EXPECT_EQ(length_crc, masked_crc32c(bytes.substr(at, 8)));
    const std::string data = bytes.substr(at + 12, length);
    std::memcpy(&data_crc, bytes.data() + at + 12 + length, 4);
    EXPECT_EQ(data_crc, masked_crc32c(data));
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

TEST(TensorBoard, Crc32cHasTheCastagnoliCheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283U);  // the CRC-32C check value (RFC 3720, iSCSI)
  EXPECT_EQ(crc32c(""), 0U);
}

TEST(TensorBoard, RecordsAreFramedAndTheFileVersionComesFirst) {
  const fs::path dir = fs::temp_directory_path() / ("dtlab_tb_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string path;
  {
    TensorBoardWriter tb((dir / "rank0").string());
    path = tb.path();
    tb.scalar("train/loss", 1, 5.25);
    tb.scalar("train/loss", 2, 4.5);
    tb.flush();
  }
  EXPECT_NE(fs::path(path).filename().string().find("events.out.tfevents."), std::string::npos);
  const std::vector<std::string> records = read_records(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  // Summary.Value: tag "train/loss" (field 1) then simple_value 5.25f (field 2, fixed32).
  const float value = 5.25f;
  std::string tail = "\x0a\x0atrain/loss\x15";
  tail.append(reinterpret_cast<const char*>(&value), 4);
  EXPECT_NE(records[1].find(tail), std::string::npos);
  fs::remove_all(dir);
}

TEST(TensorBoard, AnUnwritableDirectoryIsAnErrorNamingIt) {
  const fs::path file = fs::temp_directory_path() / ("dtlab_tb_file_" + std::to_string(::getpid()));
  std::ofstream(file) << "a file, not a directory";
  try {
    TensorBoardWriter tb((file / "rank0").string());
    FAIL() << "expected TensorBoardError";
  } catch (const TensorBoardError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  fs::remove(file);
}

}  // namespace
}  // namespace dtlab
