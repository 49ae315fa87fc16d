// cmd_train.cpp: `dtlab train --config FILE [section.key=value ...] [--out DIR]` — one training run, or one rank of
// a job when a launcher's environment (dtlab launch, torchrun, srun) or --rank says so. Without --out the run goes to
// results/train/<the config's name>; a missing data/corpus.bin (the shipped configs' token file) is built first.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analysis/cost/predict.hpp"
#include "lab/cli/command.hpp"
#include "lab/comm/nccl_backend.hpp"
#include "lab/config.hpp"
#include "lab/data/default_corpus.hpp"
#include "lab/device.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/launch/cluster.hpp"
#include "lab/node_layout.hpp"
#include "lab/train/oom_stop.hpp"
#include "lab/train/trainer.hpp"
#include "lab/world.hpp"
#include "strategies/catalog.hpp"
#include "strategies/registry.hpp"

namespace dtlab::cli {
namespace {

struct TrainArgs {
  std::string config_path, out_dir;
  std::vector<std::string> overrides;
  RankArgs rank;
  std::string bind_addr;
  double timeout_s = 60.0;
  int64_t stop_after = 0;
};

// The command that reruns this run: under `dtlab launch` the launch command (the launcher exports it as
// DTLAB_JOB_COMMAND), otherwise this process's own command line (torchrun, srun and single runs).
std::string job_command(const CommandLine& line) {
  const char* launcher = std::getenv("DTLAB_LAUNCHER");
  const char* job = std::getenv("DTLAB_JOB_COMMAND");
  if (launcher && std::string(launcher) == "dtlab" && job && *job) return job;
  return reproduce_command(line);
}

// The world this process belongs to: one process, or a rank of a job found by discover_rank_env.
std::unique_ptr<World> make_world(const TrainArgs& args, const std::string& backend, bool check_collectives) {
  const RankEnv env = discover_rank_env(args.rank, current_environment());
  if (env.world_size == 1 && env.launcher == "none") return std::make_unique<SingleProcessWorld>();
  RendezvousOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000.0));
  options.bind_addr = args.bind_addr;
  options.backend = backend == "auto" ? "gloo" : backend;  // CPU tensors: gloo (run_train resolves auto on GPUs)
  options.check_collectives = check_collectives;
  return std::make_unique<DistWorld>(env, options);
}

// The cluster this rank runs on, for the prediction: nodes of LOCAL_WORLD_SIZE ranks when the job spans several,
// and the link rates `dtlab launch --nodes` set (DTLAB_INTER_LINK / DTLAB_INTRA_LINK; absent elsewhere).
analysis::Topology run_topology(const RankEnv& env) {
  analysis::Topology topology;
  if (!job_spans_nodes(env.world_size, env.local_world_size)) return topology;
  topology.nodes = env.world_size / env.local_world_size;
  topology.ranks_per_node = env.local_world_size;
  topology.inter_link_bps = launched_link_bps(std::getenv("DTLAB_INTER_LINK")).value_or(0);
  topology.intra_link_bps = launched_link_bps(std::getenv("DTLAB_INTRA_LINK")).value_or(0);
  return topology;
}

// Where the run's results go: --out, else results/train/<config stem> (as `make train` writes results/train/<name>).
std::string results_dir(const TrainArgs& args) {
  if (!args.out_dir.empty()) return args.out_dir;
  return (std::filesystem::path("results") / "train" / std::filesystem::path(args.config_path).stem()).string();
}

int run_train(TrainArgs args, const std::string& command) {
  const RankEnv env = discover_rank_env(args.rank, current_environment());
  // Validate before any rendezvous, so a bad config (or machine profile) fails fast on every rank alike.
  Config config = load_config(args.config_path, args.overrides, env.world_size);
  if (args.out_dir.empty()) {
    args.out_dir = results_dir(args);
    if (env.rank == 0) std::printf("results: %s (no --out given)\n", args.out_dir.c_str());
  }
  // The shipped configs read data/corpus.bin, which is built, not committed: a fresh clone builds it here.
  if (config.data.source == "file")
    if (const auto built = build_default_corpus_if_missing(config.data.path)) std::printf("%s\n", built->c_str());
  if (config.parallel.backend == "nccl" && !comm::nccl_built())
    throw ConfigError(
        "parallel.backend=nccl needs the cuda configuration (cmake -DDTLAB_CUDA=ON, make build-cuda) "
        "and GPUs; this is a cpu build: use parallel.backend=gloo (or auto)");
  config.ranks_per_node = env.local_world_size;
  config.host_ranks = env.host_ranks;
  // parallel.backend=auto: comm::auto_backend's rule, recorded as chosen in result.json's config. On the CPU it stays
  // auto, which the world runs over Gloo.
  if (config.parallel.backend == "auto" && resolve_train_device(config.train.device, env.local_rank).cuda())
    config.parallel.backend = comm::auto_backend(true, cuda_device_count(), env.local_world_size, env.world_size);
  TrainOptions options;
  options.out_dir = args.out_dir;
  options.command = command;
  options.stop_after_step = args.stop_after;
  const analysis::Topology topology = run_topology(env);
  // parallel.collectives=auto with a machine profile: the model picks DDP's all-reduce across nodes (every rank
  // computes the same choice from the same files); without one, the rule of strategies/ddp_buckets.hpp.
  if (!config.instrument.profile.empty()) {
    const analysis::MachineProfile profile =
        analysis::on_topology(analysis::load_profile(config.instrument.profile), topology);
    if (const auto choice = analysis::choose_collectives(config, profile)) {
      config.parallel.collectives = choice->collectives;
      if (env.rank == 0)
        std::printf(
            "parallel.collectives=auto: %s by the model (%s: predicted step %.1f ms flat, %.1f ms hierarchical)\n",
            choice->collectives.c_str(), config.instrument.profile.c_str(), choice->flat_step_ms,
            choice->hierarchical_step_ms);
    }
  }
  options.predict = analysis::run_prediction(config, topology);
  auto strategy = make_strategy(config.parallel.strategy);
  auto world = make_world(args, config.parallel.backend, config.instrument.check_collectives);
  TrainOutcome outcome;
  try {
    outcome = train(config, *strategy, *world, device_mesh(config), options);
  } catch (const OutOfMemoryStop& e) {
    std::fprintf(stderr, "error: %s; result.json records status oom\n", e.what());
    std::fflush(nullptr);
    // The other ranks have ended (or will, once the record is written); collectives in flight can never complete,
    // so the process group is not torn down.
    if (world->board() != nullptr) std::_Exit(kOutOfMemoryExitCode);
    return kOutOfMemoryExitCode;
  }
  if (world->is_main()) {
    const auto& summary = outcome.result["summary"];
    std::printf("done: %lld steps | final loss %.4f | median %.1f ms/step | %.0f tok/s | results in %s\n",
                static_cast<long long>(outcome.steps.size()), summary["final_loss"].get<double>(),
                summary["step_ms_median"].get<double>(), summary["tokens_per_s"].get<double>(), args.out_dir.c_str());
  }
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app, const CommandLine& line) {
  auto args = std::make_shared<TrainArgs>();
  auto* train = app.add_subcommand("train", "one training run (one rank of a job under a launcher)");
  train->footer(
      "Builds data/corpus.bin first when a config reads it and it is missing.\n"
      "example: dtlab train --config scenarios/configs/baseline.yaml train.steps=30\n"
      "example: dtlab launch -n 2 dtlab train --config scenarios/configs/ddp.yaml parallel.strategy=ddp");
  train->add_option("--config", args->config_path, "YAML config file (scenarios/configs/*.yaml)")->required();
  train->add_option("--out", args->out_dir, "results directory (default results/train/<config name>)");
  train->add_option("overrides", args->overrides, "section.key=value overrides, e.g. train.steps=50 model.preset=tiny");
  train->add_option("--rank", args->rank.rank, "this process's rank (else the launcher's environment's)");
  train->add_option("--world-size", args->rank.world_size, "number of ranks (with --rank)");
  train->add_option("--local-rank", args->rank.local_rank, "rank on this machine (with --rank)");
  train->add_option("--master-addr", args->rank.master_addr, "rendezvous host (rank 0's address)");
  train->add_option("--master-port", args->rank.master_port, "rendezvous port");
  train->add_option("--bind", args->bind_addr, "rank 0's listening address when MASTER_ADDR is not loopback");
  train->add_option("--timeout", args->timeout_s, "rendezvous and collective timeout in seconds");
  train->add_option("--stop-after", args->stop_after, "stop cleanly after this step, as a preempted job would")
      ->check(CLI::PositiveNumber);
  return {train, [args, line] { return run_train(*args, job_command(line)); }};
}

}  // namespace dtlab::cli
