// rank_output.cpp: the launcher's own messages and every rank's stdout/stderr relayed line by line with a
// "[rank r] " prefix, one write per batch of lines, so lines of different ranks never interleave mid-line.
#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "lab/launch/launch_internal.hpp"

namespace dtlab::launch_internal {
namespace {

// Lines longer than this are emitted in pieces rather than buffered without bound.
constexpr size_t kMaxPendingLineBytes = 1 << 20;

}  // namespace

// Writes all of `text` to `fd`, retrying short writes and EINTR. Errors (e.g. a closed consumer) are
// dropped: losing output must never stop supervision.
void write_fully(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

// The launcher's own messages go to stderr in one write each, so they never split a rank's line.
[[gnu::format(printf, 1, 2)]] void launcher_message(const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): a false positive, va_start is just above
  const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  if (n < 0) return;
  std::string line = "dtlab launch: ";
  line.append(buffer, std::min<size_t>(static_cast<size_t>(n), sizeof buffer - 1));
  line += '\n';
  write_fully(STDERR_FILENO, line);
}

// Emits every complete line in `stream.pending` (or everything, at EOF) with the rank prefix, as one
// write so that lines from different ranks never interleave mid-line.
void emit_lines(RankStream& stream, int rank, bool at_eof) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::string output;
  size_t line_start = 0;
  while (true) {
    const size_t newline = stream.pending.find('\n', line_start);
    if (newline == std::string::npos) break;
    output += prefix;
    output.append(stream.pending, line_start, newline - line_start + 1);
    line_start = newline + 1;
  }
  stream.pending.erase(0, line_start);
  if (!stream.pending.empty() && (at_eof || stream.pending.size() >= kMaxPendingLineBytes)) {
    output += prefix + stream.pending + "\n";
    stream.pending.clear();
  }
  if (!output.empty()) write_fully(stream.destination_fd, output);
}

// Reads what is available on `stream` (poll said it is readable); closes it at EOF or error.
void read_stream(RankStream& stream, int rank) {
  char buffer[65536];
  const ssize_t n = ::read(stream.fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n > 0) {
    stream.pending.append(buffer, static_cast<size_t>(n));
    emit_lines(stream, rank, false);
    return;
  }
  emit_lines(stream, rank, true);
  ::close(stream.fd);
  stream.fd = -1;
}

}  // namespace dtlab::launch_internal
