// cmd_predict.cpp: `dtlab predict --config FILE [key=value ...] [--world-size N] [--profile FILE]` — memory by
// category, communication, step time and tokens/s of one configuration as JSON (analysis/cost/predict.hpp); shapes
// too large to train here (model.preset=7b) are projected.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/cost/predict.hpp"
#include "lab/cli/command.hpp"
#include "lab/config.hpp"

namespace dtlab::cli {

Command add_predict_command(CLI::App& app) {
  struct Args {
    std::string config_path, profile_path;
    std::vector<std::string> overrides;
    int world_size = 1, rank = 0;
  };
  auto args = std::make_shared<Args>();
  auto* predict = app.add_subcommand("predict",
                                     "predicted memory by category, communication, step time and "
                                     "tokens/s as JSON (a projection for shapes beyond this machine)");
  predict->add_option("--config", args->config_path, "YAML config file (scenarios/configs/*.yaml)")->required();
  predict->add_option("overrides", args->overrides, "section.key=value overrides, e.g. model.preset=7b");
  predict->add_option("--world-size", args->world_size, "ranks of the job to predict")->check(CLI::PositiveNumber);
  predict->add_option("--profile", args->profile_path,
                      "machine profile JSON (dtlab calibrate, or analysis/profiles/h100_sxm.json); "
                      "without it: memory and bytes only");
  predict->add_option("--rank", args->rank, "the rank whose memory is predicted (sharded padding differs)");
  return {predict, [args] {
            const Config config = load_config(args->config_path, args->overrides, args->world_size);
            std::optional<analysis::MachineProfile> profile;
            if (!args->profile_path.empty()) profile = analysis::load_profile(args->profile_path);
            std::printf("%s\n", analysis::predict(config, profile ? &*profile : nullptr, args->rank).dump(2).c_str());
            return 0;
          }};
}

}  // namespace dtlab::cli
