// main.cpp: the `dtlab` command-line tool.
//
//   dtlab train --config FILE [section.key=value ...] --out DIR   one training run (one rank of a job)
//   dtlab data build --out FILE [TEXT_FILE ...]                    byte-level token file from text
//   dtlab report RESULT_DIR... -o reports/NAME                     HTML + PNG report
//   dtlab launch -n N [--] PROGRAM ARGS...                         N local ranks, torchrun-style env
//   dtlab version
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <torch/version.h>
#include <CLI/CLI.hpp>

#include "analysis/report.hpp"
#include "lab/config.hpp"
#include "lab/data.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/export.hpp"
#include "lab/launch.hpp"
#include "lab/results.hpp"
#include "lab/train/trainer.hpp"
#include "lab/world.hpp"
#include "strategies/registry.hpp"

namespace {

// The command line as a shell would need it to run again (arguments quoted where needed).
std::string reproduce_command(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
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

struct DistArgs {
  dtlab::RankArgs rank;
  std::string bind_addr;
  double timeout_s = 60.0;
};

// The world this process belongs to: one process, or a rank of a job found by discover_rank_env.
std::unique_ptr<dtlab::World> make_world(const DistArgs& args, const std::string& backend) {
  const dtlab::RankEnv env = dtlab::discover_rank_env(args.rank, dtlab::current_environment());
  if (env.world_size == 1 && env.launcher == "none") return std::make_unique<dtlab::SingleProcessWorld>();
  dtlab::RendezvousOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000.0));
  options.bind_addr = args.bind_addr;
  options.backend = backend == "auto" ? "gloo" : backend;  // CPU tensors: gloo (nccl needs CUDA tensors)
  return std::make_unique<dtlab::DistWorld>(env, options);
}

int run_train(const std::string& config_path, const std::vector<std::string>& overrides, const std::string& out_dir,
              const std::string& command, const DistArgs& dist) {
  const dtlab::RankEnv env = dtlab::discover_rank_env(dist.rank, dtlab::current_environment());
  // Validate before any rendezvous, so a bad config fails fast on every rank alike.
  const dtlab::Config config = dtlab::load_config(config_path, overrides, env.world_size);
  auto strategy = dtlab::make_strategy(config.parallel.strategy);
  auto world = make_world(dist, config.parallel.backend);
  dtlab::TrainOptions options;
  options.out_dir = out_dir;
  options.command = command;
  auto outcome = dtlab::train(config, *strategy, *world, options);
  if (world->is_main()) {
    const auto& summary = outcome.result["summary"];
    std::printf("done: %lld steps | final loss %.4f | median %.1f ms/step | %.0f tok/s | results in %s\n",
                static_cast<long long>(outcome.steps.size()), summary["final_loss"].get<double>(),
                summary["step_ms_median"].get<double>(), summary["tokens_per_s"].get<double>(), out_dir.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtlab: one GPT model, many distributed training strategies — measured, explained, predicted"};
  app.require_subcommand(1);

  std::string config_path, out_dir;
  std::vector<std::string> overrides;
  auto* train = app.add_subcommand("train", "run one training (one rank of a job when rank env is set)");
  train->add_option("--config", config_path, "YAML config file (scenarios/configs/*.yaml)")->required();
  train->add_option("--out", out_dir, "results directory (result.json, rank<r>/steps.jsonl)")->required();
  train->add_option("overrides", overrides, "section.key=value overrides, e.g. train.steps=50 model.preset=small");
  DistArgs dist;
  train->add_option("--rank", dist.rank.rank, "this process's rank (else from the launcher's environment)");
  train->add_option("--world-size", dist.rank.world_size, "number of ranks (with --rank)");
  train->add_option("--local-rank", dist.rank.local_rank, "rank on this machine (with --rank)");
  train->add_option("--master-addr", dist.rank.master_addr, "rendezvous host (rank 0's address)");
  train->add_option("--master-port", dist.rank.master_port, "rendezvous port");
  train->add_option("--bind", dist.bind_addr,
                    "address rank 0's store listens on when MASTER_ADDR is not loopback (explicit by design)");
  train->add_option("--timeout", dist.timeout_s, "rendezvous and collective timeout in seconds");

  std::string data_out;
  std::vector<std::string> text_files;
  auto* data = app.add_subcommand("data", "token data tools");
  data->require_subcommand(1);
  auto* data_build = data->add_subcommand("build", "turn text files into a byte-level token file");
  data_build->add_option("--out", data_out, "token file to write (e.g. data/corpus.bin)")->required();
  data_build->add_option("texts", text_files,
                         "text files (default: the license texts under /usr/share/common-licenses)");

  std::vector<std::string> report_inputs;
  std::string report_out = "reports/latest";
  auto* report = app.add_subcommand("report", "render results as HTML + PNG");
  report->add_option("inputs", report_inputs, "result, scenario or results directories")->required();
  report->add_option("-o,--out", report_out, "report directory");

  dtlab::LaunchOptions launch_options;
  auto* launch = app.add_subcommand("launch",
                                    "start N local ranks of PROGRAM (torchrun-style environment); "
                                    "if one fails, stop the others and name it");
  launch->add_option("-n,--nproc", launch_options.nproc, "number of ranks")->required()->check(CLI::PositiveNumber);
  launch->add_option("--master-port", launch_options.master_port, "rendezvous port (default: a free port)");
  launch->add_option("--grace", launch_options.grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks");
  launch->add_option("--timeout", launch_options.timeout_s, "stop the job after this many seconds (0 = never)");
  launch->add_option("command", launch_options.command, "PROGRAM ARGS... (each rank's program and its arguments)")
      ->required();
  launch->prefix_command();      // everything from PROGRAM on belongs to the program, even -n or --timeout
  launch->positionals_at_end();  // ... and `--` may separate it explicitly

  std::string export_config, export_out;
  std::vector<std::string> export_overrides;
  int export_world = 1;
  auto* export_ref = app.add_subcommand(
      "export-reference", "write init weights, batches and learning rates for an outside reference (tests/reference/)");
  export_ref->add_option("--config", export_config, "YAML config file")->required();
  export_ref->add_option("--world-size", export_world, "ranks the batches are split for")->check(CLI::PositiveNumber);
  export_ref->add_option("--out", export_out, "directory to write")->required();
  export_ref->add_option("overrides", export_overrides, "section.key=value overrides");

  auto* version = app.add_subcommand("version", "print versions");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (*train) return run_train(config_path, overrides, out_dir, reproduce_command(argc, argv), dist);
    if (*data_build) {
      if (text_files.empty()) text_files = dtlab::default_corpus_files();
      const int64_t n = dtlab::build_token_file_from_text(text_files, data_out);
      std::printf("wrote %s: %lld tokens from %zu files\n", data_out.c_str(), static_cast<long long>(n),
                  text_files.size());
      return 0;
    }
    if (*launch) return dtlab::run_launch(launch_options);
    if (*export_ref) {
      const dtlab::Config config = dtlab::load_config(export_config, export_overrides, export_world);
      dtlab::export_reference_inputs(config, export_world, export_out);
      std::printf("wrote reference inputs to %s\n", export_out.c_str());
      return 0;
    }
    if (*report) return dtlab::analysis::render_report(report_inputs, report_out, std::cout);
    if (*version) {
      std::printf("dtlab %s (git %s), torch %s\n", dtlab::dtlab_version().c_str(), dtlab::git_sha().c_str(),
                  TORCH_VERSION);
      return 0;
    }
  } catch (const dtlab::ConfigError& e) {
    std::fprintf(stderr, "dtlab: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtlab: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
