// main.cpp: the `dtlab` command-line tool.
//
//   dtlab train --config FILE [section.key=value ...] --out DIR   one training run (one rank of a job)
//   dtlab data build --out FILE [TEXT_FILE ...]                    byte-level token file from text
//   dtlab report RESULT_DIR... -o reports/NAME                     HTML + PNG report
//   dtlab launch -n N [--] PROGRAM ARGS...                         N local ranks, torchrun-style env
//   dtlab trace merge RUN_DIR_OR_FILES... -o OUT.json.gz           one Perfetto/HTA trace for all ranks
//   dtlab comm-bench [-b 1K -e 256M -f 4 -n 10 -w 3 --op all --json FILE --model FILE]   nccl-tests-style table
//   dtlab calibrate --out FILE [--ranks 2] [--quick] [--config FILE key=value ...]   machine profile JSON
//   dtlab predict --config FILE [key=value ...] [--world-size N] [--profile FILE]   prediction JSON
//   dtlab version
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <torch/version.h>
#include <CLI/CLI.hpp>

#include "analysis/accuracy.hpp"
#include "analysis/cost/comm_model.hpp"
#include "analysis/cost/fit.hpp"
#include "analysis/cost/predict.hpp"
#include "analysis/report.hpp"
#include "lab/calibrate.hpp"
#include "lab/comm/bench.hpp"
#include "lab/config.hpp"
#include "lab/data.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/export.hpp"
#include "lab/instrument/trace.hpp"
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

// The command that reruns this run: under `dtlab launch` the launch command (the launcher exports it as
// DTLAB_JOB_COMMAND), otherwise this process's own command line (torchrun, srun and single runs).
std::string job_command(int argc, char** argv) {
  const char* launcher = std::getenv("DTLAB_LAUNCHER");
  const char* job = std::getenv("DTLAB_JOB_COMMAND");
  if (launcher && std::string(launcher) == "dtlab" && job && *job) return job;
  return reproduce_command(argc, argv);
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

// `dtlab comm-bench`: the flags as typed, before they become CommBenchOptions.
struct CommBenchArgs {
  std::string min_bytes = "1K", max_bytes = "256M", op = "all", algorithm = "all", model_path;
  int check = 1;
};

int run_comm_bench(dtlab::CommBenchOptions options, const CommBenchArgs& args, int argc, char** argv) {
  options.min_bytes = dtlab::parse_byte_size(args.min_bytes);
  options.max_bytes = dtlab::parse_byte_size(args.max_bytes);
  options.ops = dtlab::resolve_comm_bench_ops(args.op);
  options.algorithms = dtlab::resolve_comm_bench_algorithms(args.algorithm);
  options.check = args.check != 0;
  for (int i = 1; i < argc; ++i)  // this subcommand's arguments, to re-launch itself as N ranks
    if (std::string(argv[i]) == "comm-bench") {
      options.relaunch_args.assign(argv + i + 1, argv + argc);
      break;
    }
  if (!args.model_path.empty()) {
    std::ifstream in(args.model_path);
    if (!in) throw std::runtime_error("comm-bench: --model " + args.model_path + ": cannot read the file");
    auto model = std::make_shared<dtlab::analysis::CommModel>(
        dtlab::analysis::comm_model_from_document(nlohmann::json::parse(in), args.model_path));
    options.model = dtlab::CommBenchModel{
        args.model_path,
        [model](const std::string& op, const std::string& algorithm, int64_t bytes, int group_size) {
          return dtlab::analysis::collective_time_us(*model, op, algorithm, bytes, group_size);
        },
        [](const std::string& op) { return std::string(dtlab::analysis::fitted_placement(op)) == "in_place"; }};
  }
  return dtlab::run_comm_bench(options);
}

// `dtlab predict`: memory by category, communication, step time and tokens/s of one configuration as JSON
// (analysis/cost/predict.hpp); shapes too large to train here (model.preset=7b) are projected.
int run_predict(const std::string& config_path, const std::vector<std::string>& overrides, int world_size,
                const std::string& profile_path, int rank) {
  const dtlab::Config config = dtlab::load_config(config_path, overrides, world_size);
  std::optional<dtlab::analysis::MachineProfile> profile;
  if (!profile_path.empty()) profile = dtlab::analysis::load_profile(profile_path);
  std::printf("%s\n", dtlab::analysis::predict(config, profile ? &*profile : nullptr, rank).dump(2).c_str());
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
  bool report_accuracy = false, report_enforce = false;
  report->add_flag("--accuracy", report_accuracy,
                   "print predicted-vs-measured accuracy against the cost-model targets instead of a report");
  report
      ->add_flag("--enforce", report_enforce,
                 "with --accuracy: exit 3 unless every target is met (a missed or not-judged target fails)")
      ->needs("--accuracy");

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

  std::vector<std::string> trace_inputs;
  std::string trace_out;
  auto* trace = app.add_subcommand("trace", "Chrome/Perfetto trace tools");
  trace->require_subcommand(1);
  auto* trace_merge = trace->add_subcommand("merge", "merge every rank's trace.json.gz into one file");
  trace_merge->add_option("inputs", trace_inputs, "run dirs (their rank*/trace.json.gz) or trace files")->required();
  trace_merge->add_option("-o,--out", trace_out, "merged trace to write (.json.gz: gzip)")->required();

  dtlab::CommBenchOptions bench;
  CommBenchArgs bench_args;
  auto* comm_bench = app.add_subcommand("comm-bench",
                                        "collective benchmark in the manner of nccl-tests (Gloo): "
                                        "time, algbw, busbw, #wrong per size; JSON for calibrate");
  comm_bench->add_option("-b,--minbytes", bench_args.min_bytes, "smallest size in bytes (K/M/G suffixes)");
  comm_bench->add_option("-e,--maxbytes", bench_args.max_bytes, "largest size in bytes (K/M/G suffixes)");
  comm_bench->add_option("-f,--stepfactor", bench.factor, "size multiplier from one row to the next");
  comm_bench->add_option("-n,--iters", bench.iters, "timed calls per size and placement");
  comm_bench->add_option("-w,--warmup_iters", bench.warmup, "untimed calls before them");
  comm_bench->add_option("--repeats", bench.repeats, "timed loops per size; the fastest counts (1 = nccl-tests)");
  comm_bench->add_option("--op", bench_args.op, "all_reduce | all_gather | reduce_scatter | broadcast | all");
  comm_bench->add_option("--algorithm", bench_args.algorithm,
                         "backend | ring | all (all_reduce ring = lab ring reduce-scatter + ring all-gather)");
  comm_bench->add_option("--dtype", bench.dtype, "float32 | bfloat16");
  comm_bench->add_option("--json", bench.json_path, "also write the results as JSON (input of dtlab calibrate)");
  comm_bench->add_option("--ranks", bench.ranks, "ranks to start when not already a rank of a job");
  comm_bench->add_option("-c,--check", bench_args.check, "1 = count wrong elements in a separate pass, 0 = skip");
  comm_bench->add_option("--model", bench_args.model_path,
                         "comm model or machine profile JSON: adds predicted time and error % per row");
  comm_bench->add_option("--timeout", bench.timeout_s, "rendezvous and collective timeout in seconds");
  comm_bench->add_option("--report-fd", bench.report_fd)->group("");  // set by the re-launch: rank 0's report

  dtlab::CalibrateOptions calibrate_options;
  auto* calibrate = app.add_subcommand(
      "calibrate", "measure this machine (comm-bench, GEMMs, a training step, AdamW) and write a machine profile");
  calibrate->add_option("--out", calibrate_options.out_path, "machine profile JSON to write")->required();
  calibrate->add_option("--ranks", calibrate_options.ranks, "ranks of the jobs to calibrate for (>= 2)");
  calibrate->add_flag("--quick", calibrate_options.quick, "fewer sizes and repeats (tests)");
  calibrate->add_flag("--compute-only", calibrate_options.compute_only,
                      "internal: a companion process that loads the machine like the other ranks of a job");
  calibrate->add_option("--config", calibrate_options.config_path, "shapes to calibrate on (default: small)");
  calibrate->add_option("overrides", calibrate_options.overrides, "section.key=value overrides of the config");

  std::string predict_config, predict_profile;
  std::vector<std::string> predict_overrides;
  int predict_world = 1, predict_rank = 0;
  auto* predict = app.add_subcommand("predict",
                                     "predicted memory by category, communication, step time and "
                                     "tokens/s as JSON (a projection for shapes beyond this machine)");
  predict->add_option("--config", predict_config, "YAML config file (scenarios/configs/*.yaml)")->required();
  predict->add_option("overrides", predict_overrides, "section.key=value overrides, e.g. model.preset=7b");
  predict->add_option("--world-size", predict_world, "ranks of the job to predict")->check(CLI::PositiveNumber);
  predict->add_option("--profile", predict_profile,
                      "machine profile JSON (dtlab calibrate, or analysis/profiles/h100_sxm.json); "
                      "without it: memory and bytes only");
  predict->add_option("--rank", predict_rank, "the rank whose memory is predicted (sharded padding differs)");

  auto* version = app.add_subcommand("version", "print versions");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (*train) return run_train(config_path, overrides, out_dir, job_command(argc, argv), dist);
    if (*data_build) {
      if (text_files.empty()) text_files = dtlab::default_corpus_files();
      const int64_t n = dtlab::build_token_file_from_text(text_files, data_out);
      std::printf("wrote %s: %lld tokens from %zu files\n", data_out.c_str(), static_cast<long long>(n),
                  text_files.size());
      return 0;
    }
    if (*launch) {
      // Each rank records the command that reruns the whole job (result.json context.command), not its own.
      ::setenv("DTLAB_JOB_COMMAND", reproduce_command(argc, argv).c_str(), 1);
      return dtlab::run_launch(launch_options);
    }
    if (*export_ref) {
      const dtlab::Config config = dtlab::load_config(export_config, export_overrides, export_world);
      dtlab::export_reference_inputs(config, export_world, export_out);
      std::printf("wrote reference inputs to %s\n", export_out.c_str());
      return 0;
    }
    if (*report && report_accuracy)
      return dtlab::analysis::run_accuracy(report_inputs, std::cout, std::cerr, report_enforce);
    if (*report) return dtlab::analysis::render_report(report_inputs, report_out, std::cout);
    if (*calibrate) {
      calibrate_options.command = reproduce_command(argc, argv);
      calibrate_options.make_strategy = [](const std::string& id) { return dtlab::make_strategy(id); };
      return dtlab::run_calibrate(calibrate_options);
    }
    if (*trace_merge) {
      std::printf("%s\n", dtlab::merge_trace_files(trace_inputs, trace_out).c_str());
      return 0;
    }
    if (*comm_bench) return run_comm_bench(bench, bench_args, argc, argv);
    if (*predict) return run_predict(predict_config, predict_overrides, predict_world, predict_profile, predict_rank);
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
