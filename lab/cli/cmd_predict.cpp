// cmd_predict.cpp: `dtlab predict --config FILE [key=value ...] [--world-size N] [--profile FILE]
// [--nodes M --ranks-per-node K --inter-link RATE --intra-link RATE]` — memory by category, communication, step time
// and tokens/s of one configuration as JSON (analysis/cost/predict.hpp); shapes too large to train here
// (model.preset=7b) and clusters other than the one calibrated (analysis/cost/topology.hpp) are projected. With a
// profile, parallel.collectives=auto across nodes is resolved by the model first (its choice: "collectives_choice").
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/cost/predict.hpp"
#include "analysis/cost/topology.hpp"
#include "lab/cli/command.hpp"
#include "lab/config.hpp"
#include "lab/launch/cluster.hpp"
#include "strategies/catalog.hpp"

namespace dtlab::cli {
namespace {

struct PredictArgs {
  std::string config_path, profile_path, inter_link, intra_link;
  std::vector<std::string> overrides;
  int world_size = 0, rank = 0, nodes = 1, ranks_per_node = 0, ranks_per_link = 0, host_ranks = 0;
};

// The topology of the flags, and the world size it implies (--nodes x --ranks-per-node, which --world-size must
// match when both are given).
analysis::Topology topology_of(PredictArgs& args) {
  analysis::Topology t;
  t.nodes = args.nodes;
  if (args.nodes > 1) {
    if (args.ranks_per_node < 1)
      throw std::invalid_argument("predict: --nodes " + std::to_string(args.nodes) +
                                  " needs --ranks-per-node K (the job has nodes x K ranks)");
    const int world = args.nodes * args.ranks_per_node;
    if (args.world_size != 0 && args.world_size != world)
      throw std::invalid_argument("predict: --world-size " + std::to_string(args.world_size) + " is not --nodes " +
                                  std::to_string(args.nodes) + " x --ranks-per-node " +
                                  std::to_string(args.ranks_per_node) + " = " + std::to_string(world));
    args.world_size = world;
  }
  t.ranks_per_node = args.ranks_per_node;
  t.ranks_per_link = args.ranks_per_link;
  if (!args.inter_link.empty()) t.inter_link_bps = parse_link_rate(args.inter_link, "--inter-link").bits_per_s;
  if (!args.intra_link.empty()) t.intra_link_bps = parse_link_rate(args.intra_link, "--intra-link").bits_per_s;
  if (args.world_size == 0) args.world_size = 1;
  return t;
}

}  // namespace

Command add_predict_command(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  auto* predict = app.add_subcommand("predict", "predicted memory, communication and step time, as JSON");
  predict->footer(
      "Shapes and clusters beyond this machine are projected (label: projection).\n"
      "example: dtlab predict --config scenarios/configs/ddp.yaml --world-size 8 model.preset=1b");
  predict->add_option("--config", args->config_path, "YAML config file (scenarios/configs/*.yaml)")->required();
  predict->add_option("overrides", args->overrides, "section.key=value overrides, e.g. model.preset=7b");
  predict->add_option("--world-size", args->world_size, "ranks of the job to predict")->check(CLI::PositiveNumber);
  predict->add_option("--profile", args->profile_path, "machine profile JSON (without: memory and bytes only)");
  predict->add_option("--rank", args->rank, "the rank whose memory is predicted (padding differs)");
  predict->add_option("--nodes", args->nodes, "nodes of the job (with --ranks-per-node)")->check(CLI::PositiveNumber);
  predict->add_option("--ranks-per-node", args->ranks_per_node, "ranks on each node")->check(CLI::PositiveNumber);
  predict->add_option("--inter-link", args->inter_link, "inter-node link rate (200mbit, 1gbit, 400gbit)");
  predict->add_option("--intra-link", args->intra_link, "intra-node link rate (e.g. 8gbit, at most 1000gbit)");
  predict->add_option("--ranks-per-link", args->ranks_per_link, "ranks sharing one inter-node link (1: a NIC per GPU)")
      ->check(CLI::PositiveNumber);
  predict->add_option("--host-ranks", args->host_ranks, "ranks sharing this machine's cores (default: the node's)")
      ->check(CLI::PositiveNumber);
  return {predict, [args] {
            const analysis::Topology topology = topology_of(*args);
            Config config = load_config(args->config_path, args->overrides, args->world_size);
            if (args->nodes > 1) config.ranks_per_node = args->ranks_per_node;
            config.host_ranks = args->host_ranks;
            std::optional<analysis::MachineProfile> profile;
            if (!args->profile_path.empty())
              profile = analysis::on_topology(analysis::load_profile(args->profile_path), topology);
            // parallel.collectives=auto across nodes: the model's choice, as `dtlab train` makes it with a profile.
            std::optional<analysis::CollectivesChoice> choice;
            if (profile) choice = analysis::choose_collectives(config, *profile);
            if (choice) config.parallel.collectives = choice->collectives;
            nlohmann::json out = analysis::predict(config, profile ? &*profile : nullptr, args->rank);
            if (choice)
              out["collectives_choice"] = {{"chosen", choice->collectives},
                                           {"flat_step_ms", choice->flat_step_ms},
                                           {"hierarchical_step_ms", choice->hierarchical_step_ms}};
            std::printf("%s\n", out.dump(2).c_str());
            return 0;
          }};
}

}  // namespace dtlab::cli
