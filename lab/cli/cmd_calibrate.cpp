// cmd_calibrate.cpp: `dtlab calibrate --out FILE [--ranks 2] [--nodes M --inter-link RATE] [--quick] [--dtypes L]
// [--config FILE key=value ...]` — measure this machine (or an emulated cluster on it) and write the machine profile
// the cost models read (lab/tools/calibrate.hpp).
#include <memory>
#include <sstream>
#include <string>

#include "lab/cli/command.hpp"
#include "lab/tools/calibrate.hpp"
#include "strategies/registry.hpp"

namespace dtlab::cli {

Command add_calibrate_command(CLI::App& app, const CommandLine& line) {
  auto options = std::make_shared<CalibrateOptions>();
  auto* calibrate =
      app.add_subcommand("calibrate", "measure this machine and write its profile (as make calibrate does)");
  calibrate->footer(
      "Measures comm-bench, GEMMs, a training step and AdamW; the cost models read the profile.\n"
      "example: dtlab calibrate --out results/calibration/profile.json");
  calibrate->add_option("--out", options->out_path, "machine profile JSON to write")->required();
  calibrate->add_option("--ranks", options->ranks, "ranks of the jobs to calibrate for (>= 2; with --nodes: per node)");
  calibrate->add_option("--nodes", options->nodes, "an emulated cluster of M nodes (root; needs --inter-link)");
  calibrate->add_option("--inter-link", options->inter_link, "with --nodes: the inter-node rate (200mbit, 1gbit)");
  calibrate->add_option("--intra-link", options->intra_link, "with --nodes: the intra-node rate (default: unshaped)");
  calibrate->add_flag("--quick", options->quick, "fewer sizes and repeats (tests)");
  auto dtype_list = std::make_shared<std::string>();  // one comma-separated word: key=value words follow it
  calibrate->add_option("--dtypes", *dtype_list,
                        "dtypes to time: fp32,bf16,fp16 (the default) or fewer; fp32 required");
  calibrate->add_flag("--compute-only", options->compute_only,
                      "internal: a companion loading the machine as a job's other ranks");
  calibrate->add_option("--local-rank", options->local_rank)->group("");  // a companion's GPU index
  calibrate->add_option("--config", options->config_path, "shapes to calibrate on (default: small)");
  calibrate->add_option("overrides", options->overrides, "section.key=value overrides of that config");
  return {calibrate, [options, line, dtype_list] {
            options->command = reproduce_command(line);
            std::stringstream words(*dtype_list);
            for (std::string word; std::getline(words, word, ',');)
              if (!word.empty()) options->dtypes.push_back(word);
            options->make_strategy = [](const std::string& id) { return make_strategy(id); };
            return run_calibrate(*options);
          }};
}

}  // namespace dtlab::cli
