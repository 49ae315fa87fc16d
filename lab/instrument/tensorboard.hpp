// tensorboard.hpp: TensorBoard scalar event files, written without TensorFlow (torch-free).
//
// Usage:
//   TensorBoardWriter tb("results/run/tensorboard/rank0");        // creates the dir and one events file
//   tb.scalar("train/loss", 3, 5.12);                              // tag, step, value
//   tb.flush();                                                    // after each step: a crash loses nothing
//   // tensorboard --logdir results/run/tensorboard                // one TensorBoard "run" per rank
//
// File: <dir>/events.out.tfevents.<unix seconds>.<host>.<pid> (TensorBoard finds files by "tfevents" in the
// name). It is a TFRecord stream of tensorflow.Event protocol-buffer messages:
//   record = uint64 length | uint32 masked_crc32c(length) | length bytes of data | uint32 masked_crc32c(data)
//   (little-endian; masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8, crc32c = Castagnoli)
// The first Event holds file_version "brain.Event:2"; each scalar is an Event {wall_time, step,
// summary {value {tag, simple_value}}}. Only the handful of protobuf fields above are encoded (by hand: the
// wire format of three messages; see docs/architecture.md for why no protobuf library).
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dtlab {

class TensorBoardError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TensorBoardWriter {
 public:
  // Creates `dir` and the events file in it. Throws TensorBoardError naming the path when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One scalar at `step`, stamped with the current wall time. Non-finite values are written as they are
  // (TensorBoard shows NaN/inf). Throws TensorBoardError on a write error.
  void scalar(const std::string& tag, int64_t step, double value);
  void flush();  // to the kernel: a rank that dies keeps every scalar written so far
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  std::FILE* file_ = nullptr;
};

// CRC-32C (Castagnoli polynomial, reflected 0x82F63B78) of `bytes`, and TFRecord's masked form of it.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace dtlab
