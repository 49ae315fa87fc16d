// cmd_export_reference.cpp: `dtlab export-reference --config FILE --out DIR` — the exact inputs of a run (initial
// weights, every rank's micro-batches, learning rates) for an outside reference (tests/reference/).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "lab/cli/command.hpp"
#include "lab/config.hpp"
#include "lab/export.hpp"
#include "strategies/catalog.hpp"

namespace dtlab::cli {

Command add_export_reference_command(CLI::App& app) {
  struct Args {
    std::string config_path, out;
    std::vector<std::string> overrides;
    int world_size = 1;
  };
  auto args = std::make_shared<Args>();
  auto* exporter = app.add_subcommand("export-reference", "a run's exact inputs, for an outside reference");
  exporter->footer(
      "Writes the initial weights, every rank's batches and the learning rates (tests/reference/).\n"
      "example: dtlab export-reference --config scenarios/configs/ddp.yaml --out /tmp/ref");
  exporter->add_option("--config", args->config_path, "YAML config file")->required();
  exporter->add_option("--world-size", args->world_size, "ranks the batches are split for")->check(CLI::PositiveNumber);
  exporter->add_option("--out", args->out, "directory to write")->required();
  exporter->add_option("overrides", args->overrides, "section.key=value overrides");
  return {exporter, [args] {
            const Config config = load_config(args->config_path, args->overrides, args->world_size);
            export_reference_inputs(config, args->world_size, args->out);
            std::printf("wrote reference inputs to %s\n", args->out.c_str());
            return 0;
          }};
}

}  // namespace dtlab::cli
