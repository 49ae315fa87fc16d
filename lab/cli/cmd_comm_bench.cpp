// cmd_comm_bench.cpp: `dtlab comm-bench [-b 1K -e 256M -f 4 -n 10 -w 3 --op all --json FILE --model FILE]` — the
// collective benchmark in the manner of nccl-tests (lab/tools/comm_bench.hpp); with --model each row also gets the cost
// model's predicted time and its error.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "analysis/cost/comm_model.hpp"
#include "analysis/cost/fit.hpp"
#include "analysis/cost/step_model.hpp"
#include "analysis/cost/topology.hpp"
#include "lab/cli/command.hpp"
#include "lab/comm/hierarchical.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/launch/cluster.hpp"
#include "lab/node_layout.hpp"
#include "lab/tools/comm_bench.hpp"

namespace dtlab::cli {
namespace {

// The flags as typed, before they become CommBenchOptions.
struct CommBenchArgs {
  CommBenchOptions options;
  std::string min_bytes = "1K", max_bytes = "256M", op = "all", algorithm = "all", model_path;
  int check = 1;
};

// The comm model of --model as the benchmark's predictor. A comm model document predicts every row with itself. A
// machine profile on a job across nodes is first moved onto this cluster's layout and links (DTLAB_INTER_LINK /
// DTLAB_INTRA_LINK, analysis/cost/topology.hpp), then each row takes the level it crosses: --group node the
// intra-node model, --group cross the inter-node one, the whole job's flat collectives the inter-node one (one
// stream per link) and the hierarchical all-reduce its three calls (analysis/cost/step_model.hpp).
CommBenchModel bench_model(const std::string& path, const std::string& group) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("comm-bench: --model " + path + ": cannot read the file");
  const nlohmann::json doc = nlohmann::json::parse(in);
  const auto in_place = [](const std::string& op) { return std::string(analysis::fitted_placement(op)) == "in_place"; };
  const RankEnv env = discover_rank_env({}, current_environment());
  const bool is_profile = doc.is_object() && doc.contains("comm");
  if (!is_profile || !job_spans_nodes(env.world_size, env.local_world_size)) {
    auto model = std::make_shared<analysis::CommModel>(analysis::comm_model_from_document(doc, path));
    return CommBenchModel{path,
                          [model](const std::string& op, const std::string& algorithm, int64_t bytes, int group_size) {
                            return analysis::collective_time_us(*model, op, algorithm, bytes, group_size);
                          },
                          in_place};
  }
  analysis::Topology topology;
  topology.nodes = env.world_size / env.local_world_size;
  topology.ranks_per_node = env.local_world_size;
  topology.inter_link_bps = launched_link_bps(std::getenv("DTLAB_INTER_LINK")).value_or(0);
  topology.intra_link_bps = launched_link_bps(std::getenv("DTLAB_INTRA_LINK")).value_or(0);
  auto profile = std::make_shared<analysis::MachineProfile>(
      analysis::on_topology(analysis::MachineProfile::from_json(doc, path), topology));
  const int k = topology.ranks_per_node, nodes = topology.nodes;
  return CommBenchModel{
      path,
      [profile, group, k, nodes](const std::string& op, const std::string& algorithm, int64_t bytes, int group_size) {
        const auto call_us = [&](const std::string& o, const std::string& a, int64_t b, int size, int stride) {
          PlannedCollective c{o, a, "float32", b, size, "backward", 1, "comm-bench", stride};
          return analysis::planned_collective_us(c, Config{}, *profile);
        };
        if (group == "node") return call_us(op, algorithm, bytes, group_size, 1);
        if (group == "cross")  // one stream per link: the other local ranks wait (lab/tools/comm_bench.hpp)
          return analysis::collective_time_us(
              profile->comm.inter_node ? *profile->comm.inter_node : profile->comm.intra_node, op, algorithm, bytes,
              group_size);
        if (algorithm != "hierarchical") return call_us(op, algorithm, bytes, group_size, 1);
        return analysis::hierarchical_all_reduce_us(*profile, bytes, nodes, k, HierarchicalComm::kPieceBytes);
      },
      in_place};
}

int run(CommBenchArgs& args, const CommandLine& line) {
  CommBenchOptions& options = args.options;
  options.min_bytes = parse_byte_size(args.min_bytes);
  options.max_bytes = parse_byte_size(args.max_bytes);
  options.ops = resolve_comm_bench_ops(args.op);
  options.algorithms = resolve_comm_bench_algorithms(args.algorithm);
  options.check = args.check != 0;
  for (int i = 1; i < line.argc; ++i)  // this subcommand's arguments, to re-launch itself as N ranks
    if (std::string(line.argv[i]) == "comm-bench") {
      options.relaunch_args.assign(line.argv + i + 1, line.argv + line.argc);
      break;
    }
  if (!args.model_path.empty()) options.model = bench_model(args.model_path, options.group);
  return run_comm_bench(options);
}

}  // namespace

Command add_comm_bench_command(CLI::App& app, const CommandLine& line) {
  auto args = std::make_shared<CommBenchArgs>();
  CommBenchOptions& bench = args->options;
  auto* comm_bench =
      app.add_subcommand("comm-bench", "collective benchmark in the manner of nccl-tests (Gloo, or NCCL)");
  comm_bench->footer(
      "Prints time, algbw, busbw and #wrong per size.\n"
      "example: dtlab comm-bench -b 1K -e 256M -f 4   (2 local ranks, every collective)");
  comm_bench->add_option("-b,--minbytes", args->min_bytes, "smallest size in bytes (K/M/G suffixes)");
  comm_bench->add_option("-e,--maxbytes", args->max_bytes, "largest size in bytes (K/M/G suffixes)");
  comm_bench->add_option("-f,--stepfactor", bench.factor, "size multiplier from one row to the next");
  comm_bench->add_option("-n,--iters", bench.iters, "timed calls per size and placement");
  comm_bench->add_option("-w,--warmup_iters", bench.warmup, "untimed calls before them");
  comm_bench->add_option("--repeats", bench.repeats, "timed loops per size; the fastest counts");
  comm_bench->add_option("--op", args->op, "all (the five flat ones) or one op, e.g. all_to_all, all_gather_dim1");
  comm_bench->add_option("--algorithm", args->algorithm,
                         "backend | ring | hierarchical (two levels, across nodes) | all");
  comm_bench->add_option("--dtype", bench.dtype, "float32 | bfloat16");
  comm_bench->add_option("--device", bench.device, "cpu | cuda: where the buffers live");
  comm_bench->add_option("--backend", bench.backend, "auto | gloo | nccl (auto: nccl when each local rank has a GPU)");
  comm_bench->add_option("--json", bench.json_path, "also write the results as JSON (calibrate's input)");
  comm_bench->add_option("--ranks", bench.ranks, "ranks (per node) to start, unless already in a job");
  comm_bench->add_option("--nodes", bench.nodes, "on an emulated cluster of M nodes (dtlab launch --nodes; root)");
  comm_bench->add_option("--inter-link", bench.inter_link, "with --nodes: the inter-node rate (200mbit, 1gbit)");
  comm_bench->add_option("--intra-link", bench.intra_link, "with --nodes: the intra-node rate (default: unshaped)");
  comm_bench->add_option("--group", bench.group, "world | node | cross: all ranks, each node's, or one per node")
      ->check(CLI::IsMember({"world", "node", "cross"}));
  comm_bench->add_option("-c,--check", args->check, "1 = count wrong elements in a separate pass, 0 = skip");
  comm_bench->add_option("--model", args->model_path, "a machine profile: adds predicted time and error % per row");
  comm_bench->add_option("--timeout", bench.timeout_s, "rendezvous and collective timeout in seconds");
  comm_bench->add_option("--report-fd", bench.report_fd)->group("");  // set by the re-launch: rank 0's report
  return {comm_bench, [args, line] { return run(*args, line); }};
}

}  // namespace dtlab::cli
