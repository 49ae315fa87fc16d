// comm_bench.cpp: `dtlab comm-bench` (see comm_bench.hpp), the driver. It owns the size sweep, the check pass, warm-up,
// timing, the maximum over ranks and the summary; the collectives are described in comm_bench/collectives.cpp and the
// output formats are reporters (comm_bench/table_reporter.cpp, comm_bench/json_reporter.cpp), as in nccl-tests.
#include "lab/tools/comm_bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"
#include "lab/comm/hierarchical.hpp"
#include "lab/comm/nccl_backend.hpp"
#include "lab/device.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/dtype_torch.hpp"
#include "lab/launch.hpp"
#include "lab/launch/cluster.hpp"
#include "lab/process.hpp"
#include "lab/stats.hpp"
#include "lab/tools/comm_bench/collective.hpp"
#include "lab/tools/comm_bench/reporter.hpp"

namespace dtlab {

namespace {

using comm_bench::BenchHeader;
using comm_bench::BenchSeries;
using comm_bench::BenchSummary;
using comm_bench::Figure;
using comm_bench::Reporter;
using comm_bench::Row;

constexpr int64_t kP2pBytes = int64_t{64} << 20;
constexpr int64_t kOverlapBytes = int64_t{4} << 20;  // the overlap line's all_reduce: a DDP bucket's size
constexpr int64_t kOverlapGemmSize = 256;
constexpr int kOverlapRounds = 5;
constexpr int64_t kModelMinBytes = 1024, kModelMaxBytes = int64_t{256} << 20;  // the accuracy target's range

const std::vector<std::string> kAlgorithms = {"backend", "ring", "hierarchical"};

// float32 | bfloat16 (either spelling): the types whose check-pattern sums are exact and that Gloo reduces.
Dtype bench_dtype(const std::string& name) {
  const std::optional<Dtype> d = parse_dtype(name);
  if (!d || *d == Dtype::fp16)
    throw std::invalid_argument("comm-bench: --dtype " + name + " is not one of float32 | bfloat16");
  return *d;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Mean time per call over `iters` calls after `warmup`, the maximum over ranks, in microseconds. With
// repeats > 1 the timed loop runs that many times and the smallest of those figures is kept. On a GPU the loop
// starts and ends with a device synchronize, so the time is the device's, not the time to queue the calls.
double time_calls(const std::function<void()>& call, World& world, Comm& comm, const CommBenchOptions& options,
                  const TrainDevice& device) {
  for (int i = 0; i < options.warmup; ++i) call();
  double best_us = 0;
  for (int repeat = 0; repeat < options.repeats; ++repeat) {
    synchronize(device);
    comm.barrier();  // everyone starts the timed calls together
    const double start = seconds_now();
    for (int i = 0; i < options.iters; ++i) call();
    synchronize(device);
    const double mean_us = world.all_reduce_max((seconds_now() - start) * 1e6 / options.iters);
    best_us = repeat == 0 ? mean_us : std::min(best_us, mean_us);
  }
  return best_us;
}

// Where a row runs: the group's comm for the cases, the job's comm to start every rank's timed loop together, and
// whether this rank takes part (with --group cross only the ranks of local rank 0 do; the others wait).
struct Placement {
  comm_bench::CaseComms comms;
  Comm& job;
  bool active = true;
  TrainDevice device;  // where the buffers live (comms.device), and whose queue the timed loops wait for
};

// One row's figure in one placement: the check pass (wrong elements summed over ranks), then the timed calls.
Figure measure(const comm_bench::CollectiveSpec& spec, const Placement& where, World& world, const Row& row,
               at::ScalarType type, bool in_place, const CommBenchOptions& options) {
  const std::unique_ptr<comm_bench::CollectiveCase> c =
      spec.make_case(where.comms, row.algorithm, row.count, type, in_place);
  Figure f;
  if (options.check) {
    if (where.active) {
      c->fill();
      c->run();
    }
    const double wrong = where.active ? static_cast<double>(c->wrong()) : 0.0;
    f.wrong = static_cast<int64_t>(std::llround(world.all_reduce_sum(wrong)));
  }
  f.time_us = time_calls(
      [&] {
        if (where.active) c->run();
      },
      world, where.job, options, where.device);
  f.algbw_GBps = static_cast<double>(row.bytes) / f.time_us * 1e-3;  // bytes/us = MB/s
  f.busbw_GBps = f.algbw_GBps * busbw_factor(row.op, where.comms.group.size());
  return f;
}

// The --group a row runs over, checked against the job's layout.
Placement placement(const CommBenchOptions& options, const std::optional<comm_bench::ClusterFacts>& cluster, Comm& job,
                    HierarchicalComm* two_level, const TrainDevice& device) {
  if (options.group == "world") return {{job, two_level, device.device}, job, true, device};
  if (options.group != "node" && options.group != "cross")
    throw std::invalid_argument("comm-bench: --group " + options.group + " is not one of world | node | cross");
  if (!cluster || !two_level)
    throw std::invalid_argument("comm-bench: --group " + options.group +
                                " needs a job across nodes (--nodes 2 or more, or a launcher that sets "
                                "LOCAL_WORLD_SIZE below WORLD_SIZE)");
  if (options.group == "node") {
    if (cluster->ranks_per_node < 2)
      throw std::invalid_argument("comm-bench: --group node needs 2 or more ranks per node (--ranks 2), got " +
                                  std::to_string(cluster->ranks_per_node));
    return {{two_level->intra(), nullptr, device.device}, job, true, device};
  }
  return {{two_level->inter(), nullptr, device.device}, job, two_level->intra().rank() == 0, device};
}

// Gloo send/recv between ranks `a` and `b`, both directions at once; other ranks wait. Time per exchange, us.
double measure_p2p(Comm& comm, World& world, at::ScalarType type, const CommBenchOptions& options,
                   const TrainDevice& device, int a, int b) {
  const int64_t count = kP2pBytes / static_cast<int64_t>(c10::elementSize(type));
  at::Tensor send = comm_bench::pattern(comm.rank(), 0, count, type).to(device.device);
  at::Tensor recv = at::empty({count}, send.options());
  const bool pair = comm.rank() == a || comm.rank() == b;
  const int peer = comm.rank() == a ? b : a;
  return time_calls(
      [&] {
        if (pair) comm.exchange(send, peer, recv, peer);
      },
      world, comm, options, device);
}

// The overlap line (reporter.hpp's OverlapFigure): an all_reduce of a DDP bucket's size over the group, square fp32
// GEMMs on every rank of the job (the ranks outside a --group cross group compute too, as they would in training),
// and both at once. The ranks keep the intra-op threads they were started with, as a training rank does.
comm_bench::OverlapFigure measure_overlap(const Placement& where, World& world, at::ScalarType type,
                                          const CommBenchOptions& options) {
  Comm& group = where.comms.group;
  const int64_t p = group.size(), element = static_cast<int64_t>(c10::elementSize(type));
  comm_bench::OverlapFigure o;
  const int64_t count = std::max<int64_t>(p, kOverlapBytes / element / p * p);
  o.bytes = count * element;
  o.gemm_size = kOverlapGemmSize;
  at::Tensor buffer = comm_bench::pattern(group.rank(), 0, count, type).to(where.device.device);
  const auto on_device = at::TensorOptions().device(where.device.device);
  const at::Tensor a = at::rand({kOverlapGemmSize, kOverlapGemmSize}, on_device);
  const at::Tensor b = at::rand({kOverlapGemmSize, kOverlapGemmSize}, on_device);
  at::Tensor product = at::empty({kOverlapGemmSize, kOverlapGemmSize}, on_device);
  const auto issue = [&] { return where.active ? group.all_reduce(buffer, "comm-bench.overlap") : CommHandle(); };
  const auto comm_alone = [&] {
    if (CommHandle h = issue(); h.valid()) h.wait();
  };
  const auto gemms = [&] {
    for (int i = 0; i < o.gemms; ++i) at::mm_out(product, a, b);
  };
  const auto together = [&] {
    CommHandle h = issue();
    gemms();
    if (h.valid()) h.wait();
  };
  // The three figures are a difference of similar times, so each is the median of kOverlapRounds rounds that take
  // them in turn (load that comes and goes touches all three alike), each round a mean over at least 10 calls.
  CommBenchOptions each = options;
  each.iters = std::max(options.iters, 10);
  each.warmup = 1;
  each.repeats = 1;
  o.gemms = 1;
  const TrainDevice& device = where.device;
  const double one_gemm_us = time_calls(gemms, world, where.job, each, device);
  o.gemms =
      std::max(1, static_cast<int>(std::lround(time_calls(comm_alone, world, where.job, each, device) / one_gemm_us)));
  std::vector<double> comm_us, compute_us, together_us;
  for (int round = 0; round < kOverlapRounds; ++round) {
    comm_us.push_back(time_calls(comm_alone, world, where.job, each, device));
    compute_us.push_back(time_calls(gemms, world, where.job, each, device));
    together_us.push_back(time_calls(together, world, where.job, each, device));
  }
  o.comm_us = median(comm_us);
  o.compute_us = median(compute_us);
  o.together_us = median(together_us);
  const double hidden = (o.comm_us + o.compute_us - o.together_us) / std::min(o.comm_us, o.compute_us);
  o.hidden_fraction = std::clamp(hidden, -1.0, 1.0);  // below 0: overlapping cost more than taking turns
  return o;
}

// The nodes this job's ranks span, and the rates `dtlab launch --nodes` set (DTLAB_INTER_LINK / DTLAB_INTRA_LINK);
// nullopt on one node.
std::optional<comm_bench::ClusterFacts> cluster_facts(const RankEnv& env) {
  if (env.local_world_size >= env.world_size || env.world_size % env.local_world_size != 0) return std::nullopt;
  comm_bench::ClusterFacts facts;
  facts.ranks_per_node = env.local_world_size;
  facts.nodes = env.world_size / env.local_world_size;
  const auto link = [&](const char* variable) {
    return env.launcher == "dtlab" ? launched_link_bps(std::getenv(variable)) : std::nullopt;
  };
  const std::optional<double> inter = link("DTLAB_INTER_LINK");
  facts.inter_link = describe_launched_link(inter);
  facts.inter_link_bps = inter.value_or(0);
  facts.intra_link = describe_launched_link(link("DTLAB_INTRA_LINK"));
  return facts;
}

// all_reduce's rows at the point-to-point size against what the inter-node link allows (see LinkBound).
std::vector<comm_bench::LinkBound> link_bounds(const std::vector<Row>& rows, const comm_bench::ClusterFacts& cluster,
                                               int ranks, int64_t element) {
  std::vector<comm_bench::LinkBound> bounds;
  if (cluster.inter_link_bps <= 0) return bounds;
  const double m = cluster.nodes;
  for (const Row& row : rows) {
    if (row.op != "all_reduce" || std::llabs(row.bytes - kP2pBytes) >= ranks * element) continue;
    const double bound_us = 2.0 * (m - 1.0) / m * static_cast<double>(row.bytes) * 8.0 / cluster.inter_link_bps * 1e6;
    bounds.push_back({row.algorithm, row.bytes, bound_us, row.in_place.time_us});
  }
  return bounds;
}

std::vector<int64_t> sweep(const CommBenchOptions& o) {
  std::vector<int64_t> sizes;
  for (int64_t s = o.min_bytes; s <= o.max_bytes;
       s = std::max(s + 1, static_cast<int64_t>(static_cast<double>(s) * o.factor)))
    sizes.push_back(s);
  return sizes;
}

// "load average 4.53 on 2 cores": other processes on the cores delay every wake-up of a waiting rank by up to
// a scheduler tick, which is most of a small message's time; worth knowing when reading the table.
std::string machine_load() {
  double one_minute = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &one_minute) != 1) one_minute = -1;
    std::fclose(f);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  char text[96];
  if (one_minute < 0)
    std::snprintf(text, sizeof text, "%u cores", cores);
  else
    std::snprintf(text, sizeof text, "load average %.2f on %u cores", one_minute, cores);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// --device: cpu, or this rank's GPU (cuda:(local rank % GPUs)) made current; an error names --device and the rule.
TrainDevice bench_device(const std::string& setting, int local_rank) {
  if (setting == "cuda" && cuda_device_count() == 0)
    throw std::invalid_argument(
        "comm-bench: --device cuda needs the cuda configuration (make build-cuda) and a visible GPU; this process "
        "sees none");
  return resolve_train_device(setting, local_rank);
}

// --backend: gloo | nccl | auto (comm::auto_backend's rule, as parallel.backend=auto picks it for training). nccl
// needs GPU buffers and one GPU per local rank.
std::string bench_backend(const std::string& setting, const TrainDevice& device, const RankEnv& env) {
  const bool own_gpus = device.cuda() && cuda_device_count() >= env.local_world_size;
  if (setting == "auto")
    return comm::auto_backend(device.cuda(), cuda_device_count(), env.local_world_size, env.world_size);
  if (setting == "gloo") return setting;
  if (setting != "nccl")
    throw std::invalid_argument("comm-bench: --backend " + setting + " is not one of auto | gloo | nccl");
  if (!own_gpus)
    throw std::invalid_argument("comm-bench: --backend nccl needs --device cuda and a GPU per local rank (" +
                                std::to_string(env.local_world_size) + " local ranks, " +
                                std::to_string(cuda_device_count()) + " GPU(s) visible)");
  return setting;
}

void check_options(const CommBenchOptions& options) {
  if (options.device != "cpu" && options.device != "cuda")
    throw std::invalid_argument("comm-bench: --device " + options.device + " is not one of cpu | cuda");
  if (options.backend != "auto" && options.backend != "gloo" && options.backend != "nccl")
    throw std::invalid_argument("comm-bench: --backend " + options.backend + " is not one of auto | gloo | nccl");
  if (!(options.factor > 1))
    throw std::invalid_argument("comm-bench: -f " + std::to_string(options.factor) + " must be > 1");
  if (options.min_bytes > options.max_bytes)
    throw std::invalid_argument("comm-bench: -b " + std::to_string(options.min_bytes) + " > -e " +
                                std::to_string(options.max_bytes));
  if (options.iters < 1 || options.warmup < 0 || options.repeats < 1)
    throw std::invalid_argument("comm-bench: -n and --repeats must be >= 1 and -w >= 0 (got -n " +
                                std::to_string(options.iters) + " -w " + std::to_string(options.warmup) +
                                " --repeats " + std::to_string(options.repeats) + ")");
}

// The op/algorithm pairs to run, in the catalogue's order; broadcast has no ring.
std::vector<std::pair<const comm_bench::CollectiveSpec*, std::string>> series_to_run(const CommBenchOptions& o) {
  std::vector<std::pair<const comm_bench::CollectiveSpec*, std::string>> series;
  for (const std::string& op : o.ops) {
    const comm_bench::CollectiveSpec& spec = comm_bench::collective(op);
    for (const std::string& algorithm : o.algorithms)
      if (std::find(spec.algorithms.begin(), spec.algorithms.end(), algorithm) != spec.algorithms.end())
        series.emplace_back(&spec, algorithm);
  }
  if (series.empty())
    throw std::invalid_argument("comm-bench: nothing to run: broadcast has only the backend algorithm");
  return series;
}

// The footer's figures from every row (and the point-to-point time, when measured).
BenchSummary summarize(const std::vector<Row>& rows, bool checked, std::optional<double> p2p_us, int ranks,
                       int64_t element, bool with_model) {
  BenchSummary s;
  int64_t wrong = 0;
  double busbw_sum = 0;
  for (const Row& row : rows) {
    wrong += row.out_of_place.wrong.value_or(0) + row.in_place.wrong.value_or(0);
    busbw_sum += row.out_of_place.busbw_GBps + row.in_place.busbw_GBps;
  }
  if (checked) s.total_wrong = wrong;
  s.avg_busbw_GBps = busbw_sum / (2.0 * static_cast<double>(rows.size()));
  if (p2p_us) {
    s.p2p = comm_bench::P2pFigure{kP2pBytes, *p2p_us, static_cast<double>(kP2pBytes) / *p2p_us * 1e-3};
    // all_reduce at 64 MiB: the backend's in-place figure (the lab's own all-reduce), else the ring's.
    for (const Row& row : rows)
      if (row.op == "all_reduce" && std::llabs(row.bytes - kP2pBytes) < ranks * element &&
          (!s.all_reduce_at_p2p_size || row.algorithm == "backend"))
        s.all_reduce_at_p2p_size = &row;
  }
  if (with_model) {
    std::vector<double> errors;
    for (const Row& row : rows)
      if (row.model_error_pct && row.bytes >= kModelMinBytes && row.bytes <= kModelMaxBytes)
        errors.push_back(std::fabs(*row.model_error_pct));
    s.model_rows = errors.size();
    if (!errors.empty()) s.model_median_error_pct = median(errors);
  }
  return s;
}

int relaunch(const CommBenchOptions& options) {
  if (options.ranks < 1) throw std::invalid_argument("comm-bench: --ranks " + std::to_string(options.ranks) + " < 1");
  std::fflush(stdout);
  // dup() leaves close-on-exec clear, so the ranks inherit it: rank 0 writes the report straight to our stdout.
  const int report_fd = ::dup(STDOUT_FILENO);
  if (report_fd < 0) throw std::runtime_error("comm-bench: cannot duplicate stdout for the ranks' report");
  const std::filesystem::path self = this_executable("comm-bench");
  LaunchOptions launch;
  launch.nproc = options.ranks;
  launch.nodes = options.nodes;
  launch.inter_link = options.inter_link;
  launch.intra_link = options.intra_link;
  launch.command = {self.string(), "comm-bench"};
  launch.command.insert(launch.command.end(), options.relaunch_args.begin(), options.relaunch_args.end());
  launch.command.insert(launch.command.end(), {"--report-fd", std::to_string(report_fd)});
  const int status = run_launch(launch);
  ::close(report_fd);
  return status;
}

}  // namespace

int64_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string suffix = text.substr(used);
  double multiple = 1;
  if (suffix == "K" || suffix == "k")
    multiple = 1024.0;
  else if (suffix == "M" || suffix == "m")
    multiple = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    multiple = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    used = 0;
  if (used == 0 || !(value > 0) || !std::isfinite(value))
    throw std::invalid_argument("comm-bench: size '" + text +
                                "' is not a positive byte count such as 1024, 1K, 64M, 1G");
  return static_cast<int64_t>(value * multiple);
}

std::vector<std::string> resolve_comm_bench_ops(const std::string& op) {
  std::vector<std::string> ops;
  for (const comm_bench::CollectiveSpec& spec : comm_bench::collectives())
    if ((op == "all" && spec.in_all) || op == spec.op) ops.push_back(spec.op);
  if (ops.empty()) comm_bench::collective(op);  // throws, naming the choices
  return ops;
}

std::vector<std::string> resolve_comm_bench_algorithms(const std::string& algorithm) {
  if (algorithm == "all") return kAlgorithms;
  if (std::find(kAlgorithms.begin(), kAlgorithms.end(), algorithm) == kAlgorithms.end())
    throw std::invalid_argument("comm-bench: --algorithm " + algorithm +
                                " is not one of backend | ring | hierarchical | all");
  return {algorithm};
}

int run_comm_bench(const CommBenchOptions& options) {
  const Dtype dtype = bench_dtype(options.dtype);
  const at::ScalarType type = scalar_type(dtype);
  check_options(options);
  auto series = series_to_run(options);

  const RankEnv env = discover_rank_env({}, current_environment());
  if (env.launcher == "none" && env.world_size == 1) return relaunch(options);

  // Hierarchical collectives need nodes: on one node they are left out of --algorithm all, and asking for them
  // alone is an error.
  const std::optional<comm_bench::ClusterFacts> cluster = cluster_facts(env);
  if (!cluster) {
    const auto hierarchical = [](const auto& s) { return s.second == "hierarchical"; };
    const bool only_hierarchical = std::all_of(series.begin(), series.end(), hierarchical);
    series.erase(std::remove_if(series.begin(), series.end(), hierarchical), series.end());
    if (only_hierarchical)
      throw std::invalid_argument(
          "comm-bench: --algorithm hierarchical needs a job across nodes (--nodes 2 or more, or a launcher that sets "
          "LOCAL_WORLD_SIZE below WORLD_SIZE)");
  }

  const TrainDevice device = bench_device(options.device, env.local_rank);
  RendezvousOptions rendezvous;
  rendezvous.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  rendezvous.backend = bench_backend(options.backend, device, env);
  DistWorld world(env, rendezvous);
  Comm& comm = world.comm();
  std::unique_ptr<HierarchicalComm> two_level;
  if (cluster) two_level = std::make_unique<HierarchicalComm>(world, cluster->ranks_per_node);
  if (options.group != "world")  // only the flat algorithms run inside one level
    series.erase(std::remove_if(series.begin(), series.end(), [](const auto& s) { return s.second == "hierarchical"; }),
                 series.end());
  if (series.empty()) throw std::invalid_argument("comm-bench: --algorithm hierarchical runs with --group world only");
  const Placement where = placement(options, cluster, comm, two_level.get(), device);
  const int p = where.comms.group.size();
  const bool main = world.is_main();
  std::vector<std::unique_ptr<Reporter>> reporters;  // rank 0's
  if (main) {
    reporters.push_back(comm_bench::make_table_reporter(options.report_fd));
    if (!options.json_path.empty())
      reporters.push_back(comm_bench::make_json_reporter(options.json_path, reporters.front().get()));
  }
  auto report = [&](auto&& to_each) {
    for (const auto& r : reporters) to_each(*r);
  };

  const BenchHeader header{p,
                           options.group,
                           world.world_size(),
                           host_name(),
                           std::string(torch_name(dtype)),
                           machine_load(),
                           options.min_bytes,
                           options.max_bytes,
                           options.factor,
                           options.iters,
                           options.warmup,
                           options.repeats,
                           options.check,
                           options.model ? options.model->source : std::string(),
                           rendezvous.backend,
                           device.name};
  report([&](Reporter& r) { r.begin(header); });

  const int64_t element = static_cast<int64_t>(c10::elementSize(type));
  std::vector<Row> rows;
  for (const auto& [spec, algorithm] : series) {
    const std::string& op = spec->op;
    const bool model_in_place = options.model && options.model->predicts_in_place(op);
    const BenchSeries s{op, algorithm, spec->what_runs(algorithm), options.model.has_value(), model_in_place};
    report([&](Reporter& r) { r.series(s); });
    for (int64_t requested : sweep(options)) {
      Row row;
      row.op = op;
      row.algorithm = algorithm;
      row.count = std::max<int64_t>(p, requested / element / p * p);  // whole elements, divisible by p
      row.bytes = row.count * element;
      row.out_of_place = measure(*spec, where, world, row, type, false, options);
      row.in_place = measure(*spec, where, world, row, type, true, options);
      if (main && options.model) {
        try {
          row.model_us = options.model->time_us(op, algorithm, row.bytes, p);
          const double measured = (model_in_place ? row.in_place : row.out_of_place).time_us;
          row.model_error_pct = (*row.model_us - measured) / measured * 100;
        } catch (const std::exception& e) {
          report([&](Reporter& r) { r.note(std::string("# model: ") + e.what()); });
        }
      }
      report([&](Reporter& r) { r.row(row); });
      rows.push_back(row);
    }
  }

  // The point-to-point figure between two ranks of the group: ranks 0 and 1 (world, node), or node 0 and node 1's
  // first ranks (cross); on a cluster also the inter-node one.
  const int first_of_node_1 = cluster ? cluster->ranks_per_node : 1;
  std::optional<double> p2p_us;
  if (p >= 2)
    p2p_us = measure_p2p(comm, world, type, options, device, 0, options.group == "cross" ? first_of_node_1 : 1);
  BenchSummary summary = summarize(rows, options.check, p2p_us, p, element, options.model.has_value());
  if (summary.p2p && options.group == "cross") summary.p2p->peer = first_of_node_1;
  if (p >= 2) summary.overlap = measure_overlap(where, world, type, options);
  if ((summary.cluster = cluster)) {
    if (first_of_node_1 == 1 || options.group == "cross") {
      summary.p2p_inter = summary.p2p;  // the pair above is on two nodes already
    } else {
      const double us = measure_p2p(comm, world, type, options, device, 0, first_of_node_1);
      summary.p2p_inter =
          comm_bench::P2pFigure{kP2pBytes, us, static_cast<double>(kP2pBytes) / us * 1e-3, first_of_node_1};
    }
    if (options.group == "world") summary.link_bounds = link_bounds(rows, *summary.cluster, p, element);
  }
  report([&](Reporter& r) { r.end(summary); });
  return summary.total_wrong.value_or(0) == 0 ? 0 : 1;
}

}  // namespace dtlab
