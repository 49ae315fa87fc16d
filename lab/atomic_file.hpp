// atomic_file.hpp: the one way the lab replaces a file, so that a reader, or a crash, sees the old file or the whole
// new one and never a part: the bytes go to PATH.tmp, which is fsynced, renamed over PATH, and the rename made durable
// by fsyncing the directory. Result files, token files, checkpoint shards and their metadata all go through it.
// Torch-free (dtlab_core).
//
//   AtomicFile out(path);            // creates path.tmp
//   out.write(header.data(), n);     // as many writes as needed: large files stream, nothing is held in memory
//   out.commit();                    // fsync, rename over path, fsync the directory
//   // destroyed without commit() (an exception on the way): path.tmp is removed, path is untouched
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dtlab {

// A failed create, write, fsync or rename: the message names the file and the system's reason.
class AtomicFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, int64_t bytes);
  void commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_path_; }

 private:
  void abandon();  // close and remove the temporary file (not committed, or a failure)

  std::string path_, tmp_path_;
  int fd_ = -1;
};

// The whole of `bytes` as the file at `path`, atomically (an AtomicFile written once).
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace dtlab
