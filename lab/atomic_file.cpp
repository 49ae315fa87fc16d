// atomic_file.cpp: the tmp, fsync, rename, fsync(dir) writer (see the header).
#include "lab/atomic_file.hpp"

#include <fcntl.h>   // defines: open, O_WRONLY, O_CREAT, O_TRUNC, O_CLOEXEC, O_DIRECTORY
#include <unistd.h>  // defines: write, fsync, close, unlink

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace dtlab {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int error_number) {
  throw AtomicFileError(path + ": " + what + ": " + std::strerror(error_number));
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(tmp_path_, "cannot create", errno);
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_path_.c_str());
}

void AtomicFile::write(const void* data, int64_t bytes) {
  if (fd_ < 0) throw AtomicFileError(tmp_path_ + ": written after commit or a failure");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, static_cast<size_t>(std::min<int64_t>(bytes, int64_t{1} << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error_number = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: the device took nothing
      abandon();
      fail(tmp_path_, "write failed", error_number);
    }
    p += n;
    bytes -= n;
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw AtomicFileError(tmp_path_ + ": committed twice or after a failure");
  if (::fsync(fd_) != 0) {
    const int error_number = errno;
    abandon();
    fail(tmp_path_, "fsync failed", error_number);
  }
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const int error_number = errno;
    ::unlink(tmp_path_.c_str());
    fail(tmp_path_, "close failed", error_number);
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(tmp_path_.c_str());
    fail(path_, "rename from " + tmp_path_ + " failed", error_number);
  }
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  const int dir_fd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {  // best effort: the rename itself made durable
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile out(path);
  out.write(bytes.data(), static_cast<int64_t>(bytes.size()));
  out.commit();
}

}  // namespace dtlab
