// command_line.cpp: the command line as a shell would retype it (see command.hpp).
#include <filesystem>
#include <string>
#include <system_error>

#include "lab/cli/command.hpp"

namespace dtlab::cli {

std::string reproduce_command(const CommandLine& line) {
  std::string out;
  for (int i = 0; i < line.argc; ++i) {
    std::string arg = line.argv[i];
    if (i == 0) {
      std::error_code ec;
      auto rel = std::filesystem::relative(std::filesystem::canonical("/proc/self/exe", ec), ec);
      if (!ec && !rel.empty()) arg = rel.string();
    }
    const bool plain =
        arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
        std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain && !arg.empty()) {
      out += arg;
    } else {
      out += '\'';
      for (char c : arg) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

}  // namespace dtlab::cli
