// command_line.cpp: the command line as a shell would retype it (see command.hpp).
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "lab/cli/command.hpp"

namespace dtlab::cli {

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
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

std::string reproduce_command(const CommandLine& line) {
  std::vector<std::string> argv(line.argv, line.argv + line.argc);
  if (!argv.empty()) {
    std::error_code ec;
    auto rel = std::filesystem::relative(std::filesystem::canonical("/proc/self/exe", ec), ec);
    if (!ec && !rel.empty()) argv[0] = rel.string();
  }
  return shell_command(argv);
}

}  // namespace dtlab::cli
