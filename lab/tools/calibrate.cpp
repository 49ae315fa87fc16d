// calibrate.cpp: `dtlab calibrate` — the compute measurements (calibrate_compute.cpp) beside companion processes,
// comm-bench as a child process (one per level on an emulated cluster), disk, then the machine profile; see
// calibrate.hpp.
#include "lab/tools/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "analysis/cost/fit.hpp"
#include "analysis/cost/profile.hpp"
#include "analysis/cost/topology.hpp"
#include "lab/atomic_file.hpp"
#include "lab/cpu_features.hpp"
#include "lab/device.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/launch/cluster.hpp"
#include "lab/process.hpp"
#include "lab/results.hpp"
#include "lab/stats.hpp"
#include "lab/tools/calibrate_children.hpp"
#include "lab/tools/calibrate_overlap.hpp"
#include "strategies/catalog.hpp"

namespace dtlab {
namespace {
namespace fs = std::filesystem;
using calibrate_children::calibration_overrides;
using calibrate_children::join;
using calibrate_children::read_json_file;
using calibrate_children::run_child;
using calibrate_children::self_exe;
using calibrate_children::start_child;
using calibrate_children::wait_child;
using nlohmann::json;

std::string host_name() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host[0] ? host : "localhost";
}

// The companion processes of the compute measurements: waited for normally; stopped (SIGTERM, then reaped) if the
// measurement throws, so none outlives `dtlab calibrate`.
struct Companions {
  std::vector<pid_t> pids;
  bool wait_all() {
    bool ok = true;
    for (const pid_t pid : pids) ok = wait_child(pid) == 0 && ok;
    pids.clear();
    return ok;
  }
  ~Companions() {
    for (const pid_t pid : pids) ::kill(pid, SIGTERM);
    for (const pid_t pid : pids) wait_child(pid);
  }
};

// A CPU host runs any number of local ranks over the same loopback transport: all of them are intra-node.
constexpr int kCpuRanksPerNode = 1024;

}  // namespace

namespace calibrate_children {

// Starts argv (argv[0] = program path) with inherited stdout/stderr; returns its pid.
pid_t start_child(const std::vector<std::string>& args) {
  try {
    return spawn(ProcessSpec{.argv = args});
  } catch (const ProcessError& e) {
    throw std::runtime_error(std::string("calibrate: ") + e.what());
  }
}

int wait_child(pid_t pid) { return wait_for_exit(pid); }

int run_child(const std::vector<std::string>& args) { return wait_child(start_child(args)); }

// This executable's path (children run the same dtlab).
std::string self_exe() { return this_executable("calibrate").string(); }

// The JSON document a child wrote at `path`; `missing` says which child when there is none.
json read_json_file(const std::string& path, const std::string& missing) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("calibrate: " + missing + " " + path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error("calibrate: " + path + ": not JSON: " + e.what());
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

// The overrides calibrate loads its config with: the user's, on `small` with micro-batch 4 when no config is given,
// and synthetic tokens (timing does not depend on them; no data file needed).
std::vector<std::string> calibration_overrides(const CalibrateOptions& options) {
  std::vector<std::string> overrides = options.overrides;
  if (options.config_path.empty())  // one micro-batch of 4 per rank, whatever the rank count
    overrides.insert(overrides.begin(), {"model.preset=small", "train.micro_batch=4",
                                         "train.global_batch=" + std::to_string(4 * options.ranks)});
  overrides.push_back("data.source=synthetic");
  return overrides;
}

}  // namespace calibrate_children

json run_comm_bench_child(int ranks, bool quick, const std::string& json_path,
                          const std::vector<std::string>& cluster_args, const std::vector<std::string>& device_args) {
  // Sizes: 1 KiB to 256 MiB by 4x as the per-collective target; --quick keeps three small sizes.
  // --repeats 3: the fastest of three timed loops per size, so one loop that waited for a busy core does not
  // become the fitted figure (a shared 2-core machine; see lab/tools/comm_bench.hpp). Fewer, slower calls where every
  // byte is dear:
  //   GPU buffers staged through the host: up to 64 MiB (a GPU job's buckets and units are that large);
  //   over an emulated link: up to 16 MiB. At 1 Gbit/s a 16 MiB call is already bandwidth-bound (about 130 ms), so
  //   the fitted β holds for the studies' largest calls (DDP's 17.5 MiB bucket of `small`); 64 MiB took three
  //   quarters of the cross-node sweep's time.
  std::vector<std::string> args = {self_exe(), "comm-bench", "--ranks", std::to_string(ranks)};
  const bool fewer_calls = !device_args.empty() || !cluster_args.empty();
  const std::string largest = !device_args.empty() ? "64M" : "16M";  // when fewer_calls
  const std::vector<std::string> sizes =
      quick ? std::vector<std::string>{"-b", "1K", "-e", "1M", "-f", "32", "-n", "3", "-w", "1", "-c", "0"}
      : fewer_calls
          ? std::vector<std::string>{"-b", "1K", "-e", largest, "-f", "4", "-n", "3", "-w", "1", "--repeats", "2"}
          : std::vector<std::string>{"-b", "1K", "-e", "256M", "-f", "4", "-n", "5", "-w", "2", "--repeats", "3"};
  args.insert(args.end(), sizes.begin(), sizes.end());
  args.insert(args.end(), cluster_args.begin(), cluster_args.end());
  args.insert(args.end(), device_args.begin(), device_args.end());
  args.insert(args.end(), {"--json", json_path});
  std::printf("calibrate: %s\n", join(args).c_str());
  const int status = run_child(args);
  if (status != 0) {
    throw std::runtime_error("calibrate: `" + join(args) + "` exited with status " + std::to_string(status) +
                             (status == 127 ? " (could not execute)" : ""));
  }
  return read_json_file(json_path, "comm-bench exited 0 but wrote no");
}

namespace {

// The config calibrate measures: the given one (or `small` with micro-batch 4) on synthetic tokens, at `ranks`
// (every rank of the cluster with --nodes: they all share this machine's cores).
Config calibration_config(const CalibrateOptions& options) {
  if (options.nodes < 1)
    throw std::invalid_argument("calibrate: --nodes " + std::to_string(options.nodes) + " must be >= 1");
  if (options.nodes > 1 && options.inter_link.empty())
    throw std::invalid_argument(
        "calibrate: --nodes " + std::to_string(options.nodes) +
        " needs --inter-link RATE (the inter_node model holds for the rate it was measured at)");
  if (options.nodes > 1 && options.ranks < 1)
    throw std::invalid_argument("calibrate: --ranks " + std::to_string(options.ranks) + " per node must be >= 1");
  if (options.nodes == 1 && options.ranks < 2) {
    throw std::invalid_argument("calibrate: --ranks " + std::to_string(options.ranks) +
                                " must be >= 2 (the communication fit needs a group of at least two)");
  }
  const RankEnv env = discover_rank_env(RankArgs{}, current_environment());
  if (env.world_size > 1) {
    throw std::invalid_argument("calibrate: this process is rank " + std::to_string(env.rank) + " of a " +
                                std::to_string(env.world_size) +
                                "-rank job; run dtlab calibrate from a plain shell (it starts its own ranks)");
  }
  return load_config(options.config_path, calibration_overrides(options), options.ranks);
}

// The compute figures, measured while ranks - 1 companion processes do the same work.
ComputeCalibration measure_compute_alongside_companions(const Config& config, int threads,
                                                        const CalibrateOptions& options, const TrainDevice& device,
                                                        const std::vector<Dtype>& dtypes) {
  // The studies run `ranks` ranks at once, which share cores, caches and memory bandwidth; so the compute
  // figures are measured with ranks - 1 companion processes doing the same work at the same time. On GPUs, one
  // process per GPU: a job gives each rank a GPU of its own (the companions load the node's other GPUs).
  const int processes = device.cuda() ? std::min(options.ranks, std::max(1, cuda_device_count())) : options.ranks;
  Companions companions;
  for (int i = 1; i < processes; ++i) {
    std::vector<std::string> args = {self_exe(),
                                     "calibrate",
                                     "--compute-only",
                                     "--out",
                                     options.out_path,
                                     "--ranks",
                                     std::to_string(options.ranks),
                                     "--local-rank",
                                     std::to_string(i)};
    if (options.quick) args.push_back("--quick");
    std::string dtype_list;
    for (const Dtype d : dtypes) dtype_list += (dtype_list.empty() ? "" : ",") + std::string(config_name(d));
    args.insert(args.end(), {"--dtypes", dtype_list});
    if (!options.config_path.empty()) args.insert(args.end(), {"--config", options.config_path});
    args.insert(args.end(), options.overrides.begin(), options.overrides.end());
    companions.pids.push_back(start_child(args));
  }
  ComputeCalibration compute = calibrate_compute(config, threads, options.quick, options.make_strategy, dtypes);
  if (!companions.wait_all()) throw std::runtime_error("calibrate: a companion compute process failed");
  return compute;
}

void print_compute(const ComputeCalibration& compute, int ranks) {
  std::printf("  device: %s\n", compute.device.c_str());
  std::string gemms;  // the dtypes timed (--dtypes), in kDtypes order
  for (const Dtype d : kDtypes) {
    const auto it = compute.matmul_tflops.find(std::string(torch_name(d)));
    if (it == compute.matmul_tflops.end()) continue;
    char rate[64];
    std::snprintf(rate, sizeof rate, "%s %.1f", it->first.c_str(), 1e3 * it->second);
    gemms += (gemms.empty() ? "" : ", ") + std::string(rate);
  }
  std::printf("  GEMM on the model's shapes: %s GFLOP/s\n", gemms.c_str());
  std::printf(
      "  training step (single, %s, %d companion(s) alongside): forward+backward %.1f ms = %.1f GFLOP/s of model "
      "FLOPs -> train_efficiency %.2f (its fixed part taken out); whole step %.1f ms\n",
      compute.train_dtype.c_str(), ranks - 1, compute.fwd_bwd_ms, 1e3 * compute.model_tflops, compute.train_efficiency,
      compute.step_ms);
  for (const auto& [dtype, e] : compute.train_efficiency_by_dtype)
    std::printf("  train_efficiency %s %.2f\n", dtype.c_str(), e);
  for (const auto& [dtype, widths] : compute.train_efficiency_by_width)
    for (const auto& [width, e] : widths)
      std::printf("  train_efficiency %s at d_model=%lld: %.2f\n", dtype.c_str(), static_cast<long long>(width), e);
  for (const auto& [dtype, us] : compute.gemm_overhead_us)
    std::printf("  gemm_overhead_us %s %.0f (fixed part of a micro-step: micro-batch 1 against the config's)\n",
                dtype.c_str(), us);
  std::printf(
      "  gradient norm + scaling + optimizer of that step: %.2f ms for %.1f MB -> %.1f GB/s effective; AdamW alone "
      "%.2f ms; %s copy %.1f GB/s\n",
      compute.elementwise_ms, compute.elementwise_bytes / 1e6, compute.memory_GBps, compute.adamw_ms,
      compute.device == "cpu" ? "host" : "pinned host -> device", compute.copy_GBps);
  if (compute.device_copy_GBps > 0)
    std::printf("  device-to-device copy %.1f GB/s (bytes read + written)\n", compute.device_copy_GBps);
  std::fflush(stdout);
}

void print_comm(const analysis::CommModel& comm, int ranks, const std::string& level) {
  std::printf("  communication (%s, %d ranks%s), fitted:\n", comm.backend.c_str(), ranks,
              level.empty() ? "" : (", " + level).c_str());
  const auto rate = [](double us_per_byte) {  // 1/β as GB/s; "–" for a zero coefficient
    char buf[32];
    if (us_per_byte > 0) std::snprintf(buf, sizeof buf, "%.2f GB/s", 1e-3 / us_per_byte);
    return us_per_byte > 0 ? std::string(buf) : std::string("–");
  };
  for (const auto& [key, cost] : comm.ops) {
    std::printf("    %-24s alpha %8.1f us   1/beta %-12s 1/gamma %s\n", key.c_str(), cost.alpha_us,
                rate(cost.beta_us_per_byte).c_str(), rate(cost.gamma_us_per_byte).c_str());
  }
  if (comm.overlap_hidden && *comm.overlap_hidden >= 0)
    std::printf("    overlap_hidden %.2f: compute running at once hides %.0f%% of an all_reduce\n",
                *comm.overlap_hidden, 100 * *comm.overlap_hidden);
  else if (comm.overlap_hidden)
    std::printf("    overlap_hidden %.2f: a collective beside compute costs %.0f%% more than the two in turn\n",
                *comm.overlap_hidden, -100 * *comm.overlap_hidden);
}

// The communication side: one loopback comm-bench, or on an emulated cluster one per level (calibrate.hpp, step 5).
struct CommCalibration {
  analysis::CommModel intra;
  std::optional<analysis::CommModel> inter;
  int ranks_per_node = kCpuRanksPerNode;
  double inter_link_bps = 0, intra_link_bps = 0;
  int inter_betas_raised = 0;      // inter-node βs the fit put below the link's wire time (floor_betas)
  std::vector<std::string> files;  // the comm-bench documents, next to the profile
};

CommCalibration calibrate_comm(const CalibrateOptions& options, int ranks_per_node, const fs::path& dir, bool on_gpu) {
  CommCalibration c;
  const std::string intra_path = (dir / "comm_bench.json").string();
  c.files.push_back(intra_path);
  if (options.nodes == 1) {
    // On a GPU the collectives' buffers live on the ranks' GPUs, and comm-bench picks the backend the training
    // ranks would (NCCL with a GPU per rank, else Gloo staged through pinned host memory).
    const std::vector<std::string> device_args =
        on_gpu ? std::vector<std::string>{"--device", "cuda"} : std::vector<std::string>{};
    c.intra = analysis::fit_comm_model(run_comm_bench_child(options.ranks, options.quick, intra_path, {}, device_args));
    if (on_gpu) c.ranks_per_node = std::max(options.ranks, cuda_device_count());  // this node's GPUs (or its ranks)
    return c;
  }
  if (on_gpu)
    throw std::invalid_argument(
        "calibrate: --nodes (an emulated cluster) runs on the host; calibrate a GPU machine with train.device=cuda and "
        "--nodes 1");
  std::vector<std::string> cluster = {"--nodes", std::to_string(options.nodes), "--inter-link", options.inter_link};
  if (!options.intra_link.empty()) cluster.insert(cluster.end(), {"--intra-link", options.intra_link});
  const auto with_group = [&](const char* group) {
    std::vector<std::string> args = cluster;
    args.insert(args.end(), {"--group", group});
    return args;
  };
  // Intra-node: the node's own ranks on every node at once; with one rank per node, a loopback pair.
  const json intra_bench = ranks_per_node >= 2
                               ? run_comm_bench_child(ranks_per_node, options.quick, intra_path, with_group("node"))
                               : run_comm_bench_child(2, options.quick, intra_path);
  c.intra = analysis::fit_comm_model(intra_bench);
  const std::string inter_path = (dir / "comm_bench_inter.json").string();
  c.files.push_back(inter_path);
  c.inter =
      analysis::fit_comm_model(run_comm_bench_child(ranks_per_node, options.quick, inter_path, with_group("cross")));
  c.ranks_per_node = ranks_per_node;
  c.inter_link_bps = parse_link_rate(options.inter_link, "--inter-link").bits_per_s;
  c.inter_betas_raised = analysis::floor_betas(*c.inter, analysis::wire_us_per_byte(c.inter_link_bps));
  if (!options.intra_link.empty() && options.intra_link != "none")
    c.intra_link_bps = parse_link_rate(options.intra_link, "--intra-link").bits_per_s;
  return c;
}

// The machine profile document (analysis/cost/profile.hpp's format) from what was measured.
// The rate a checkpoint is written at: a 64 MiB file written and fsynced in `dir` (where results go), median of 3,
// in GB/s. The file is removed.
double measure_disk_write_GBps(const fs::path& dir) {
  constexpr int64_t kBytes = 64 << 20;
  const std::vector<char> block(1 << 20, '\x5a');
  const std::string path = (dir / ".disk_probe").string();
  std::vector<double> seconds;
  for (int repeat = 0; repeat < 3; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("calibrate: cannot write " + path);
    for (int64_t done = 0; done < kBytes; done += static_cast<int64_t>(block.size()))
      std::fwrite(block.data(), 1, block.size(), f);
    std::fflush(f);
    ::fsync(::fileno(f));
    std::fclose(f);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  fs::remove(path);
  return static_cast<double>(kBytes) / median(seconds) / 1e9;
}

// train_efficiency_by_width with its widths as JSON object keys ("128"), as analysis/cost/profile.cpp reads them.
json width_keys(const std::map<std::string, std::map<int64_t, double>>& by_width) {
  json out = json::object();
  for (const auto& [dtype, widths] : by_width)
    for (const auto& [width, e] : widths) out[dtype][std::to_string(width)] = e;
  return out;
}

json profile_document(const CalibrateOptions& options, const Config& config, const ComputeCalibration& compute,
                      const CommCalibration& comm_levels, const std::string& host, const std::string& when,
                      double disk_write_GBps) {
  const analysis::CommModel& comm = comm_levels.intra;
  const CpuFeatures cpu = cpu_features();
  const bool gpu = compute.device != "cpu";
  json profile = {
      {"name", host + (gpu ? "_cuda" : "_cpu")},
      {"kind", "measured"},
      {"source", "dtlab calibrate on " + host + ", " + when + ": `" + options.command + "` (dtlab " + dtlab_version() +
                     ", git " + git_sha() + ")"},
      {"device", gpu ? compute.device : "cpu: " + cpu.model + " (" + std::to_string(compute.cores) + " cores)"},
      {"cpu", to_json(cpu)},  // cpuid: whether bf16 is native here decides train_efficiency_by_dtype's bf16
      {"compute",
       {{"matmul_tflops", compute.matmul_tflops},
        {"train_efficiency", compute.train_efficiency},
        {"train_efficiency_by_dtype", compute.train_efficiency_by_dtype},
        {"train_efficiency_by_width", width_keys(compute.train_efficiency_by_width)},
        {"memory_GBps", compute.memory_GBps},
        {"gemm_overhead_us", compute.gemm_overhead_us},
        {"threads", compute.threads},
        {"cores", compute.cores},
        {"ranks", options.ranks}}},  // the rank and its companions: they shared the cores while it was measured
      {"comm",
       {{"ranks_per_node", comm_levels.ranks_per_node},
        {"intra_node", comm.to_json()},
        {"measured_world_size", options.ranks}}},
      {"host_device_GBps", compute.copy_GBps},
      {"disk_write_GBps", disk_write_GBps}};

  // What each figure is; on a GPU, per-GPU rates and the copies and collectives the GPU ranks make.
  const int gpu_companions = gpu ? std::min(options.ranks, cuda_device_count()) - 1 : 0;
  json notes = json::array();
  notes.push_back(gpu ? "compute rates of one GPU (" + compute.device + ") used by one rank, measured with " +
                            std::to_string(gpu_companions) + " companion process(es) on the node's other GPUs"
                      : "compute rates hold for " + std::to_string(compute.threads) +
                            " intra-op thread(s) per rank on " + std::to_string(compute.cores) +
                            " cores (a rank of a " + std::to_string(options.ranks) + "-rank job)");
  notes.push_back("matmul_tflops: model-weighted forward and backward GEMMs of " + config.model.preset + " with " +
                  std::to_string(compute.tokens) + " rows, median over repeats");
  notes.push_back("train_efficiency: forward+backward model FLOP rate of one " + compute.train_dtype +
                  " micro-batch over the matmul rate (optimizer excluded: memory_GBps covers it), its fixed part "
                  "(gemm_overhead_us) taken out; by dtype for the dtypes calibrated (an fp32 config times each)");
  notes.push_back("train_efficiency_by_width: the same at d_model=" + std::to_string(config.model.d_model) +
                  " and at half of it (ffn_hidden halved too), against the same matmul rate; the compute model "
                  "interpolates between the widths on log2(d_model)");
  notes.push_back(
      "gemm_overhead_us: the part of a forward+backward that does not grow with its tokens, per linear layer "
      "(7 per block + the head), from the same step at micro-batch " +
      std::to_string(config.train.micro_batch) + " and 1");
  if (!gpu)
    notes.push_back("compute figures measured with " + std::to_string(options.ranks - 1) +
                    " companion process(es) doing the same work at once, as the ranks of a job share the cores");
  notes.push_back(
      "memory_GBps: the step model's elementwise bytes (gradient norm, scaling, AdamW) of that single-process "
      "step over its measured time; an effective rate, not the bus's peak");
  notes.push_back(gpu ? "ranks_per_node: this node's GPUs (or the ranks calibrated, when more): every one of them is "
                        "intra-node"
                      : "ranks_per_node: every local rank of this host is intra-node (a CPU host has no per-node GPU "
                        "count)");
  notes.push_back(gpu ? "host_device_GBps: pinned host memory to the GPU, the fp32 parameters' size (what offload's "
                        "copies cost); the GPU's own copy rate is in calibration.json (compute.device_copy)"
                      : "host_device_GBps: a host-to-host copy (no GPU): what offload costs on this machine");
  notes.push_back(
      "disk_write_GBps: 64 MiB written and fsynced next to the profile, median of 3: what a checkpoint save costs");
  notes.push_back(
      "comm.*.overlap_hidden: comm-bench's overlap line (a 4 MiB all_reduce next to GEMMs on every rank, "
      "lab/tools/comm_bench.hpp): the share of an overlapped collective the step model counts as hidden");
  if (gpu)
    notes.push_back(
        "comm: " + comm.backend + " on GPU buffers (" +
        (comm.backend == "gloo" ? "staged through pinned host memory: the ranks share the GPUs" : "one GPU per rank") +
        "), fitted to comm-bench " + (options.quick ? "1 KiB-1 MiB (--quick)" : "1 KiB-64 MiB") + " at " +
        std::to_string(options.ranks) + " ranks");
  else
    notes.push_back("comm: Gloo over loopback TCP, fitted to comm-bench " +
                    std::string(options.quick ? "1 KiB-1 MiB (--quick)" : "1 KiB-256 MiB") + " at " +
                    std::to_string(options.ranks) + " ranks");
  profile["notes"] = notes;
  if (comm_levels.inter) {
    json& c = profile["comm"];
    c["inter_node"] = comm_levels.inter->to_json();
    c["ranks_per_link"] = comm_levels.ranks_per_node;  // one link per emulated node, shared by its ranks
    c["inter_link_bps"] = comm_levels.inter_link_bps;
    if (comm_levels.intra_link_bps > 0) c["intra_link_bps"] = comm_levels.intra_link_bps;
    json& notes = profile["notes"];
    notes.back() = "comm.intra_node: Gloo inside a node of the emulated cluster (comm-bench --group node, " +
                   std::to_string(comm_levels.ranks_per_node) + " ranks per node" +
                   (comm_levels.ranks_per_node < 2 ? "; one rank per node, so a loopback pair" : "") + ")";
    notes.push_back("comm.inter_node: Gloo across " + std::to_string(options.nodes) + " emulated nodes over a " +
                    options.inter_link +
                    " tbf link, one rank per node sending (comm-bench --group cross); ranks_per_link: the node's "
                    "ranks share that one link");
    if (comm_levels.inter_betas_raised > 0)
      notes.push_back("comm.inter_node: " + std::to_string(comm_levels.inter_betas_raised) +
                      " fitted β(s) below the link's wire time raised to it (the per-call term took the time of "
                      "those sizes)");
  }
  if (gpu) {  // rates per GPU as measured: no CPU threads or cores to divide among ranks
    profile["compute"].erase("threads");
    profile["compute"].erase("cores");
    profile["compute"].erase("ranks");
  }
  bool above_gemms = compute.train_efficiency > 1.0;
  for (const auto& [dtype, widths] : compute.train_efficiency_by_width) {
    for (const auto& [width, e] : widths) {
      above_gemms = above_gemms || e > 1.0;
      if (e >= analysis::kMaxTrainEfficiency)
        profile["notes"].push_back("compute.train_efficiency_by_width." + dtype + "." + std::to_string(width) +
                                   ": held at the profile's bound; the step outran its GEMMs further (calibration.json "
                                   "has the measured figure), so they did not time the kernels it runs");
    }
  }
  if (above_gemms)
    profile["notes"].push_back(
        "compute.train_efficiency*: above 1 where a training step ran faster than its dtype's GEMMs at the model's "
        "shapes (the kernels of its other FLOPs, attention's, beat them): the GEMM rate is the unit, not a ceiling");

  return profile;
}

}  // namespace

int run_calibrate(const CalibrateOptions& given) {
  // With --nodes, `ranks` is per node; everything measured on this machine runs every rank of the cluster.
  CalibrateOptions options = given;
  if (given.nodes > 1 && given.ranks >= 1) options.ranks = given.nodes * given.ranks;
  const Config config = calibration_config(options);
  const int threads = calibration_threads(config, options.ranks);

  // The device first: a GPU asked for where there is none stops here, before any companion starts.
  const TrainDevice device = resolve_train_device(config.train.device, options.local_rank);
  const std::vector<Dtype> dtypes = calibration_dtypes(options.dtypes, config.precision.param_dtype);
  if (options.compute_only) {  // a companion: the same compute measurements, as load beside the measuring process
    calibrate_compute(config, threads, options.quick, options.make_strategy, dtypes, options.local_rank);
    return 0;
  }
  const fs::path out(options.out_path);
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(dir);
  const std::string host = host_name();
  const std::string when = utc_timestamp();
  std::printf(
      "calibrate: %s, %u cores, %d thread%s per rank (a rank of a %d-rank job), model %s, %lld tokens per "
      "micro-batch%s\n",
      host.c_str(), std::thread::hardware_concurrency(), threads, threads == 1 ? "" : "s", options.ranks,
      config.model.preset.c_str(), static_cast<long long>(config.train.micro_batch * config.model.seq_len),
      options.quick ? " (--quick: fewer repeats)" : "");
  std::printf("calibrate: %s\n", cpu_features().bf16_summary().c_str());
  std::printf("calibrate: device %s (train.device=%s)\n", device.name.c_str(), config.train.device.c_str());
  std::fflush(stdout);

  const ComputeCalibration compute = measure_compute_alongside_companions(config, threads, options, device, dtypes);
  print_compute(compute, device.cuda() ? std::min(options.ranks, cuda_device_count()) : options.ranks);
  const CommCalibration comm = calibrate_comm(options, given.ranks, dir, compute.device != "cpu");

  const double disk_write_GBps = measure_disk_write_GBps(dir);
  std::printf("calibrate: disk write %.2f GB/s (64 MiB with fsync, in %s)\n", disk_write_GBps, dir.c_str());
  const json profile = profile_document(options, config, compute, comm, host, when, disk_write_GBps);
  // Validate through the loader the predictions use, then write with its writer.
  analysis::MachineProfile validated = analysis::MachineProfile::from_json(profile, options.out_path);
  json overlap_record = nullptr;
  if (!device.cuda() && options.nodes == 1)  // step 6: a GPU's NCCL overlap and a cluster's levels keep the line
    overlap_record = apply_overlap_fit(fit_overlap_in_training(options, validated), options.ranks, validated);
  analysis::save_profile(validated, options.out_path);
  const json record = {{"profile", options.out_path}, {"host", host},
                       {"started_at", when},          {"command", options.command},
                       {"ranks", options.ranks},      {"quick", options.quick},
                       {"config", to_json(config)},   {"compute", compute.details},
                       {"nodes", options.nodes},      {"inter_link", options.inter_link},
                       {"comm_bench", comm.files},    {"overlap_fit", overlap_record}};
  write_file_atomic((dir / "calibration.json").string(), record.dump(1) + "\n");

  print_comm(validated.comm.intra_node, comm.inter ? given.ranks : options.ranks, comm.inter ? "intra-node" : "");
  if (comm.inter) print_comm(*comm.inter, options.nodes, ("inter-node, " + options.inter_link).c_str());
  std::printf("wrote %s (kind measured) and, next to it, %s and calibration.json\n", options.out_path.c_str(),
              comm.inter ? "comm_bench.json, comm_bench_inter.json" : "comm_bench.json");
  return 0;
}

}  // namespace dtlab
