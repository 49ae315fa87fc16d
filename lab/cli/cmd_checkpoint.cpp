// cmd_checkpoint.cpp: `dtlab checkpoint inspect PATH [--no-verify]` — what a training checkpoint holds (its step,
// strategy, world size, scalars, files and every tensor's pieces) and whether every piece matches its checksum.
// PATH is a step directory or a checkpoint.dir (its latest complete checkpoint). Exit 1 when a piece fails.
#include <cstdio>
#include <memory>
#include <string>

#include "lab/checkpoint/store.hpp"
#include "lab/cli/command.hpp"

namespace dtlab::cli {

Command add_checkpoint_command(CLI::App& app) {
  auto* checkpoint = app.add_subcommand("checkpoint", "inspect and verify training checkpoints");
  checkpoint->footer("example: dtlab checkpoint inspect results/mine/checkpoints   (docs/checkpointing.md)");
  checkpoint->require_subcommand(1);
  auto* inspect = checkpoint->add_subcommand("inspect", "print a checkpoint's metadata and verify its checksums");
  inspect->footer("example: dtlab checkpoint inspect results/mine/checkpoints   (its latest complete step)");
  auto path = std::make_shared<std::string>();
  auto no_verify = std::make_shared<bool>(false);
  inspect->add_option("path", *path, "a step directory, or checkpoint.dir (its latest complete step)")->required();
  inspect->add_flag("--no-verify", *no_verify, "print the metadata only; do not read the tensors");
  return {inspect, [path, no_verify] {
            int problems = 0;
            const std::string text = checkpoint::inspect(*path, !*no_verify, problems);
            std::printf("%s", text.c_str());
            return problems == 0 ? 0 : 1;
          }};
}

}  // namespace dtlab::cli
