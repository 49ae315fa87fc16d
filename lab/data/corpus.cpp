// corpus.cpp: text to token files (lab/data/corpus.hpp).
#include "lab/data/corpus.hpp"

#include <fcntl.h>   // defines: open, O_RDONLY
#include <unistd.h>  // defines: close, read, access, getpid

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "lab/data/default_corpus.hpp"
#include "lab/data/token_file.hpp"

namespace dtlab {
namespace {

// Reads a whole file; DataError naming it (and the OS reason) if it cannot.
std::string read_text_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("data: cannot read text file '" + path + "': " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error_number = errno;
      ::close(fd);
      throw DataError("data: cannot read text file '" + path + "': " + std::strerror(error_number));
    }
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

}  // namespace

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
  if (text_paths.empty()) throw_data_error(out_path, "no text files given to build it from");
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

std::optional<std::string> build_default_corpus_if_missing(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path file = fs::path(path).lexically_normal();
  std::error_code error;
  if (file != fs::path(kDefaultCorpusPath) || fs::exists(file, error)) return std::nullopt;
  const std::vector<std::string> texts = default_corpus_files();
  if (texts.empty())
    throw_data_error(path,
                     "missing, and there are no license texts in /usr/share/common-licenses to build it from; build "
                     "it from text files of your own with 'dtlab data build --out " +
                         path + " FILE.txt ...', or set data.source=synthetic");
  if (!file.parent_path().empty()) fs::create_directories(file.parent_path());
  // This process's own file, renamed into place: ranks building it at the same time never share a temporary file.
  const fs::path own = file.string() + "." + std::to_string(::getpid()) + ".building";
  const int64_t tokens = build_token_file_from_text(texts, own.string());
  fs::rename(own, file, error);
  if (error) {
    fs::remove(own);
    throw_data_error(path, "cannot rename " + own.string() + " into place: " + error.message());
  }
  return "data: " + path + " was missing: built it from the " + std::to_string(texts.size()) +
         " license texts in /usr/share/common-licenses (" + std::to_string(tokens) +
         " tokens), as 'dtlab data build --out " + path + "' does";
}

}  // namespace dtlab
