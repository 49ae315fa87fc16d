// cmd_version.cpp: `dtlab version` — dtlab's version and git commit, and LibTorch's version.
#include <cstdio>

#include <torch/version.h>

#include "lab/cli/command.hpp"
#include "lab/results.hpp"

namespace dtlab::cli {

Command add_version_command(CLI::App& app) {
  auto* version = app.add_subcommand("version", "print dtlab's version and git commit, and torch's");
  version->footer("example: dtlab version");
  return {version, [] {
            std::printf("dtlab %s (git %s), torch %s\n", dtlab_version().c_str(), git_sha().c_str(), TORCH_VERSION);
            return 0;
          }};
}

}  // namespace dtlab::cli
