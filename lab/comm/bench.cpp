// bench.cpp: `dtlab comm-bench` (see bench.hpp) — the driver owns the size sweep, the check pass, warm-up,
// timing, the maximum over ranks, the table, the footer and the JSON.
//
// Out-of-place vs in-place, given what c10d and lab/comm offer (nccl-tests' meaning: out-of-place writes
// the result into a buffer other than the input; in-place reuses the input's memory):
//   all_reduce/backend      c10d's all-reduce is in place only. in-place = that call; out-of-place = the input
//                           copied into a separate output buffer, then all-reduced there — the copy is timed.
//   all_reduce/ring         composed here from the lab's ring reduce-scatter and ring all-gather (lab/comm has
//                           no ring all-reduce call). out-of-place: input -> a chunk buffer -> a separate
//                           output; in-place: the chunk is this rank's slice of the buffer itself.
//   all_gather/*            out-of-place: a separate input chunk; in-place: the input is this rank's slice of
//                           the output (nccl-tests' layout). The lab's ring copies the input into its slice
//                           first, which in place is a copy onto itself (timed, cheap).
//   reduce_scatter/*        out-of-place: a separate output chunk; in-place: the output is this rank's slice of
//                           the input. Gloo's backend runs an all-reduce and copies the chunk out; the lab's
//                           ring clones the input before reducing (both timed: they are what the lab runs).
//   broadcast/backend       c10d's broadcast is in place only. in-place = that call (root 0); out-of-place =
//                           the root copies its input into the output buffer first (timed), then broadcasts.
// Check pattern: element i of rank r is ((131 i + 17 r) mod 13) - 6, small integers whose sums are exact in
// float32 and bfloat16; outputs start as 99 (no sum can be 99 for fewer than 17 ranks), so an element
// never written is counted wrong.
#include "lab/comm/bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "lab/comm/comm.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/launch.hpp"
#include "lab/stats.hpp"

namespace dtlab {

namespace {

constexpr int64_t kP2pBytes = int64_t{64} << 20;
constexpr int64_t kModelMinBytes = 1024, kModelMaxBytes = int64_t{256} << 20;  // the accuracy target's range
constexpr double kSentinel = 99;

const std::vector<std::string> kOps = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
const std::vector<std::string> kAlgorithms = {"backend", "ring"};

std::string what_runs(const std::string& op, const std::string& algorithm) {
  if (op == "all_reduce")
    return algorithm == "ring" ? "lab ring reduce-scatter + lab ring all-gather, composed (no copy)"
                               : "Gloo ring all-reduce; out-of-place = input copy + in-place all-reduce (copy timed)";
  if (op == "all_gather")
    return algorithm == "ring" ? "lab ring all-gather over Gloo send/recv" : "Gloo ring all-gather (_allgather_base)";
  if (op == "reduce_scatter")
    return algorithm == "ring" ? "lab ring reduce-scatter over Gloo send/recv (input clone timed)"
                               : "Gloo: all-reduce + chunk copy (~2x the bytes of a ring)";
  return "Gloo binomial tree from root 0; out-of-place = root's input copy + in-place broadcast (copy timed)";
}

at::ScalarType scalar_type_of(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "bfloat16") return at::kBFloat16;
  throw std::invalid_argument("comm-bench: --dtype " + dtype + " is not one of float32 | bfloat16");
}

// Check pattern of `rank` for global element indices [begin, begin + n).
at::Tensor pattern(int rank, int64_t begin, int64_t n, at::ScalarType type) {
  const at::Tensor i = at::arange(begin, begin + n, at::kLong);
  return ((i * 131 + rank * 17).remainder(13) - 6).to(type);
}

// Sum over ranks 0..p-1 of the pattern, computed exactly in integers.
at::Tensor pattern_sum(int p, int64_t begin, int64_t n, at::ScalarType type) {
  at::Tensor sum = at::zeros({n}, at::kLong);
  const at::Tensor i = at::arange(begin, begin + n, at::kLong);
  for (int r = 0; r < p; ++r) sum += (i * 131 + r * 17).remainder(13) - 6;
  return sum.to(type);
}

// One collective at one size in one placement: its buffers, one call, and the check of its result.
class Case {
 public:
  Case(Comm& comm, std::string op, std::string algorithm, int64_t count, at::ScalarType type, bool in_place)
      : comm_(comm),
        op_(std::move(op)),
        ring_(algorithm == "ring"),
        count_(count),
        chunk_(count / comm.size()),
        type_(type),
        in_place_(in_place) {
    const auto options = at::TensorOptions().dtype(type);
    const int64_t offset = comm.rank() * chunk_;
    const bool gathers = op_ == "all_gather";
    if (in_place_) {
      buffer_ = at::empty({count}, options);
      slice_ = buffer_.narrow(0, offset, chunk_);
      return;
    }
    input_ = at::empty({gathers ? chunk_ : count}, options);
    output_ = at::empty({op_ == "reduce_scatter" ? chunk_ : count}, options);
    if (op_ == "all_reduce" && ring_) slice_ = at::empty({chunk_}, options);
  }

  // Writes the check pattern into the inputs and the sentinel where only a result may be written.
  void fill() {
    const int r = comm_.rank(), p = comm_.size();
    const int64_t offset = r * chunk_;
    if (op_ == "all_gather") {
      (in_place_ ? buffer_ : output_).fill_(kSentinel);
      (in_place_ ? slice_ : input_).copy_(pattern(r, offset, chunk_, type_));
      return;
    }
    if (in_place_) {
      buffer_.copy_(pattern(r, 0, count_, type_));
    } else {
      input_.copy_(pattern(r, 0, count_, type_));
      output_.fill_(kSentinel);
    }
    (void)p;
  }

  // One call of the collective, waited for.
  void run() {
    const CommAlgorithm algorithm = ring_ ? CommAlgorithm::ring : CommAlgorithm::backend;
    at::Tensor& source = in_place_ ? buffer_ : input_;
    at::Tensor& result = in_place_ ? buffer_ : output_;
    if (op_ == "all_reduce" && ring_) {
      comm_.reduce_scatter(slice_, source, CommAlgorithm::ring, "comm-bench").wait();
      comm_.all_gather(result, slice_, CommAlgorithm::ring, "comm-bench").wait();
    } else if (op_ == "all_reduce") {
      if (!in_place_) output_.copy_(input_);
      comm_.all_reduce(result, "comm-bench").wait();
    } else if (op_ == "broadcast") {
      if (!in_place_ && comm_.rank() == 0) output_.copy_(input_);
      comm_.broadcast(result, 0, "comm-bench").wait();
    } else if (op_ == "all_gather") {
      comm_.all_gather(result, in_place_ ? slice_ : input_, algorithm, "comm-bench").wait();
    } else {
      comm_.reduce_scatter(in_place_ ? slice_ : output_, source, algorithm, "comm-bench").wait();
    }
  }

  // Elements of this rank's result that differ from the closed form.
  int64_t wrong() const {
    const int r = comm_.rank(), p = comm_.size();
    at::Tensor result, expected;
    if (op_ == "all_reduce") {
      result = in_place_ ? buffer_ : output_;
      expected = pattern_sum(p, 0, count_, type_);
    } else if (op_ == "broadcast") {
      result = in_place_ ? buffer_ : output_;
      expected = pattern(0, 0, count_, type_);
    } else if (op_ == "all_gather") {
      result = in_place_ ? buffer_ : output_;
      std::vector<at::Tensor> chunks;
      for (int c = 0; c < p; ++c) chunks.push_back(pattern(c, c * chunk_, chunk_, type_));
      expected = at::cat(chunks);
    } else {
      result = in_place_ ? slice_ : output_;
      expected = pattern_sum(p, r * chunk_, chunk_, type_);
    }
    return result.ne(expected).sum().item<int64_t>();
  }

 private:
  Comm& comm_;
  std::string op_;
  bool ring_;
  int64_t count_, chunk_;
  at::ScalarType type_;
  bool in_place_;
  at::Tensor input_, output_;  // out-of-place
  at::Tensor buffer_;          // in-place: the one buffer
  at::Tensor slice_;           // this rank's chunk: of buffer_ (in place), or the ring all-reduce's middle buffer
};

struct Figure {
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;
  std::optional<int64_t> wrong;  // empty when --check 0
};

struct Row {
  std::string op, algorithm;
  int64_t bytes = 0, count = 0;
  Figure out_of_place, in_place;
  std::optional<double> model_us;  // with --model
  std::optional<double> model_error_pct;
};

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Mean time per call over `iters` calls after `warmup`, the maximum over ranks, in microseconds. With
// repeats > 1 the timed loop runs that many times and the smallest of those figures is kept.
double time_calls(const std::function<void()>& call, World& world, Comm& comm, const CommBenchOptions& options) {
  for (int i = 0; i < options.warmup; ++i) call();
  double best_us = 0;
  for (int repeat = 0; repeat < options.repeats; ++repeat) {
    comm.barrier();  // everyone starts the timed calls together
    const double start = seconds_now();
    for (int i = 0; i < options.iters; ++i) call();
    const double mean_us = world.all_reduce_max((seconds_now() - start) * 1e6 / options.iters);
    best_us = repeat == 0 ? mean_us : std::min(best_us, mean_us);
  }
  return best_us;
}

Figure measure(Comm& comm, World& world, const Row& row, at::ScalarType type, bool in_place,
               const CommBenchOptions& options) {
  Case c(comm, row.op, row.algorithm, row.count, type, in_place);
  Figure f;
  if (options.check) {
    c.fill();
    c.run();
    f.wrong = static_cast<int64_t>(std::llround(world.all_reduce_sum(static_cast<double>(c.wrong()))));
  }
  f.time_us = time_calls([&] { c.run(); }, world, comm, options);
  f.algbw_GBps = static_cast<double>(row.bytes) / f.time_us * 1e-3;  // bytes/us = MB/s
  f.busbw_GBps = f.algbw_GBps * busbw_factor(row.op, comm.size());
  return f;
}

// Gloo send/recv between ranks 0 and 1, both directions at once; other ranks wait. Time per exchange, us.
double measure_p2p(Comm& comm, World& world, at::ScalarType type, const CommBenchOptions& options) {
  const int64_t count = kP2pBytes / static_cast<int64_t>(c10::elementSize(type));
  at::Tensor send = pattern(comm.rank(), 0, count, type), recv = at::empty({count}, send.options());
  const bool pair = comm.rank() < 2;
  const int peer = 1 - comm.rank();
  const double t = time_calls(
      [&] {
        if (pair) comm.exchange(send, peer, recv, peer);
      },
      world, comm, options);
  return t;
}

std::vector<int64_t> sweep(const CommBenchOptions& o) {
  std::vector<int64_t> sizes;
  for (int64_t s = o.min_bytes; s <= o.max_bytes;
       s = std::max(s + 1, static_cast<int64_t>(static_cast<double>(s) * o.factor)))
    sizes.push_back(s);
  return sizes;
}

std::string format(const char* fmt, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

std::string figure_columns(const Figure& f) {
  const std::string wrong = f.wrong ? std::to_string(*f.wrong) : "N/A";
  return format(" %10.1f %7.3f %7.3f %6s", f.time_us, f.algbw_GBps, f.busbw_GBps, wrong.c_str());
}

std::string row_line(const Row& row, const std::string& type) {
  const bool reduces = row.op == "all_reduce" || row.op == "reduce_scatter";
  std::string line =
      format("%12lld %12lld %9s %6s %6d", static_cast<long long>(row.bytes), static_cast<long long>(row.count),
             type.c_str(), reduces ? "sum" : "none", row.op == "broadcast" ? 0 : -1);
  line += figure_columns(row.out_of_place) + " " + figure_columns(row.in_place);
  if (row.model_us) line += format(" %10.1f %7.1f", *row.model_us, *row.model_error_pct);
  return line;
}

std::string table_header(bool with_model, bool model_in_place) {
  std::string h1 = "#                                                 out-of-place                           in-place";
  std::string h2 =
      "#       size        count      type  redop   root       time   algbw   busbw #wrong       time   algbw   busbw "
      "#wrong";
  std::string h3 =
      "#        (B)   (elements)                               (us)  (GB/s)  (GB/s)              (us)  (GB/s)  (GB/s)"
      "       ";
  if (with_model) {
    h1 += std::string("                 model (") + (model_in_place ? "in-place" : "out-of-place") + ")";
    h2 += "       time   err";
    h3 += "       (us)    %";
  }
  return h1 + "\n" + h2 + "\n" + h3 + "\n";
}

// "load average 4.53 on 2 cores": other processes on the cores delay every wake-up of a waiting rank by up to
// a scheduler tick, which is most of a small message's time — worth knowing when reading the table.
std::string machine_load() {
  double one_minute = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &one_minute) != 1) one_minute = -1;
    std::fclose(f);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return one_minute < 0 ? format("%u cores", cores) : format("load average %.2f on %u cores", one_minute, cores);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// Writes lines to rank 0's report stream, flushed per line so a long sweep shows progress.
class Report {
 public:
  explicit Report(int fd) {
    if (fd >= 0) {
      file_ = ::fdopen(fd, "w");
      if (!file_) throw std::runtime_error("comm-bench: cannot write the report to descriptor " + std::to_string(fd));
      owned_ = true;
    }
  }
  ~Report() {
    if (owned_) std::fclose(file_);
  }
  void line(const std::string& text) {
    std::fputs(text.c_str(), file_);
    if (text.empty() || text.back() != '\n') std::fputc('\n', file_);
    std::fflush(file_);
  }

 private:
  FILE* file_ = stdout;
  bool owned_ = false;
};

nlohmann::json figure_json(const Figure& f) {
  return {{"time_us", f.time_us},
          {"algbw_GBps", f.algbw_GBps},
          {"busbw_GBps", f.busbw_GBps},
          {"wrong", f.wrong ? nlohmann::json(*f.wrong) : nlohmann::json(nullptr)}};
}

int relaunch(const CommBenchOptions& options) {
  if (options.ranks < 1) throw std::invalid_argument("comm-bench: --ranks " + std::to_string(options.ranks) + " < 1");
  std::fflush(stdout);
  // dup() leaves close-on-exec clear, so the ranks inherit it: rank 0 writes the report straight to our stdout.
  const int report_fd = ::dup(STDOUT_FILENO);
  if (report_fd < 0) throw std::runtime_error("comm-bench: cannot duplicate stdout for the ranks' report");
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("comm-bench: cannot find this program (/proc/self/exe): " + ec.message());
  LaunchOptions launch;
  launch.nproc = options.ranks;
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
  if (op == "all") return kOps;
  if (std::find(kOps.begin(), kOps.end(), op) == kOps.end())
    throw std::invalid_argument("comm-bench: --op " + op +
                                " is not one of all_reduce | all_gather | reduce_scatter | broadcast | all");
  return {op};
}

std::vector<std::string> resolve_comm_bench_algorithms(const std::string& algorithm) {
  if (algorithm == "all") return kAlgorithms;
  if (std::find(kAlgorithms.begin(), kAlgorithms.end(), algorithm) == kAlgorithms.end())
    throw std::invalid_argument("comm-bench: --algorithm " + algorithm + " is not one of backend | ring | all");
  return {algorithm};
}

int run_comm_bench(const CommBenchOptions& options) {
  const at::ScalarType type = scalar_type_of(options.dtype);
  if (!(options.factor > 1))
    throw std::invalid_argument("comm-bench: -f " + std::to_string(options.factor) + " must be > 1");
  if (options.min_bytes > options.max_bytes)
    throw std::invalid_argument("comm-bench: -b " + std::to_string(options.min_bytes) + " > -e " +
                                std::to_string(options.max_bytes));
  if (options.iters < 1 || options.warmup < 0 || options.repeats < 1)
    throw std::invalid_argument("comm-bench: -n and --repeats must be >= 1 and -w >= 0 (got -n " +
                                std::to_string(options.iters) + " -w " + std::to_string(options.warmup) +
                                " --repeats " + std::to_string(options.repeats) + ")");
  std::vector<std::pair<std::string, std::string>> series;  // (op, algorithm)
  for (const std::string& op : options.ops)
    for (const std::string& algorithm : options.algorithms)
      if (!(op == "broadcast" && algorithm == "ring")) series.emplace_back(op, algorithm);
  if (series.empty())
    throw std::invalid_argument("comm-bench: nothing to run: broadcast has only the backend algorithm");

  const RankEnv env = discover_rank_env({}, current_environment());
  if (env.launcher == "none" && env.world_size == 1) return relaunch(options);

  RendezvousOptions rendezvous;
  rendezvous.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  DistWorld world(env, rendezvous);
  Comm& comm = world.comm();
  const int p = world.world_size();
  const bool main = world.is_main();
  std::unique_ptr<Report> report;
  if (main) report = std::make_unique<Report>(options.report_fd);
  auto say = [&](const std::string& text) {
    if (report) report->line(text);
  };

  const int64_t element = static_cast<int64_t>(c10::elementSize(type));
  say(
      format("# dtlab comm-bench: gloo, %d ranks on %s, %s, %lld..%lld B (x%g), %d iterations after %d warm-up, "
             "check %s",
             p, host_name().c_str(), options.dtype.c_str(), static_cast<long long>(options.min_bytes),
             static_cast<long long>(options.max_bytes), options.factor, options.iters, options.warmup,
             options.check ? "on" : "off"));
  say("# " + machine_load() + " at start");
  say(options.repeats > 1 ? format("# time = the smallest of %d repeats of the timed loop (--repeats), each a mean "
                                   "per call, max over ranks",
                                   options.repeats)
                          : std::string("# time = mean per call, max over ranks"));
  say("# algbw = bytes/time; busbw = algbw x (2(n-1)/n all_reduce, (n-1)/n all_gather and reduce_scatter, "
      "1 broadcast); GB = 1e9 B");
  if (options.model) say("# model: " + options.model->source);

  std::vector<Row> rows;
  int64_t total_wrong = 0;
  for (const auto& [op, algorithm] : series) {
    const bool model_in_place = options.model && options.model->predicts_in_place(op);
    say("#\n# " + op + "/" + algorithm + ": " + what_runs(op, algorithm));
    say(table_header(options.model.has_value(), model_in_place));
    for (int64_t requested : sweep(options)) {
      Row row;
      row.op = op;
      row.algorithm = algorithm;
      row.count = std::max<int64_t>(p, requested / element / p * p);  // whole elements, divisible by p
      row.bytes = row.count * element;
      row.out_of_place = measure(comm, world, row, type, false, options);
      row.in_place = measure(comm, world, row, type, true, options);
      total_wrong += row.out_of_place.wrong.value_or(0) + row.in_place.wrong.value_or(0);
      if (main && options.model) {
        try {
          row.model_us = options.model->time_us(op, algorithm, row.bytes, p);
          const double measured = (model_in_place ? row.in_place : row.out_of_place).time_us;
          row.model_error_pct = (*row.model_us - measured) / measured * 100;
        } catch (const std::exception& e) {
          say(std::string("# model: ") + e.what());
        }
      }
      say(row_line(row, options.dtype));
      rows.push_back(row);
    }
  }

  double busbw_sum = 0;
  for (const Row& row : rows) busbw_sum += row.out_of_place.busbw_GBps + row.in_place.busbw_GBps;
  const double avg_busbw = busbw_sum / (2.0 * static_cast<double>(rows.size()));
  say("#");
  say(options.check ? format("# Wrong elements       : %lld %s", static_cast<long long>(total_wrong),
                             total_wrong == 0 ? "OK" : "FAILED")
                    : std::string("# Wrong elements       : not checked (--check 0)"));
  say(format("# Avg bus bandwidth    : %.4f", avg_busbw));

  std::optional<double> p2p_us;
  if (p >= 2) {
    p2p_us = measure_p2p(comm, world, type, options);
    const double gbps = static_cast<double>(kP2pBytes) / *p2p_us * 1e-3;
    say(
        format("# Point-to-point       : %.4f GB/s per direction (Gloo send/recv, ranks 0 <-> 1, both directions at "
               "once, 64 MiB, %.1f us)",
               gbps, *p2p_us));
    // all_reduce at 64 MiB: the backend's in-place figure (the lab's own all-reduce), else the ring's.
    const Row* reference = nullptr;
    for (const Row& row : rows)
      if (row.op == "all_reduce" && std::llabs(row.bytes - kP2pBytes) < p * element &&
          (!reference || row.algorithm == "backend"))
        reference = &row;
    if (reference)
      say(format("# all_reduce busbw at 64 MiB = %.1f%% of point-to-point (target >= 80%%; %s, in-place: %.4f GB/s)",
                 reference->in_place.busbw_GBps / gbps * 100, reference->algorithm.c_str(),
                 reference->in_place.busbw_GBps));
  }

  if (main && options.model) {
    std::vector<double> errors;
    for (const Row& row : rows)
      if (row.model_error_pct && row.bytes >= kModelMinBytes && row.bytes <= kModelMaxBytes)
        errors.push_back(std::fabs(*row.model_error_pct));
    if (errors.empty())
      say("# model: no rows between 1 KiB and 256 MiB to compare");
    else
      say(format("# model: median |error| %.1f%% over %zu rows (1 KiB..256 MiB)", median(errors), errors.size()));
  }

  if (main && !options.json_path.empty()) {
    nlohmann::json results = nlohmann::json::array();
    for (const Row& row : rows)
      results.push_back({{"op", row.op},
                         {"algorithm", row.algorithm},
                         {"bytes", row.bytes},
                         {"count", row.count},
                         {"type", options.dtype},
                         {"out_of_place", figure_json(row.out_of_place)},
                         {"in_place", figure_json(row.in_place)}});
    nlohmann::json doc = {
        {"tool", "dtlab comm-bench"},  {"backend", "gloo"},      {"world_size", p},          {"host", host_name()},
        {"dtype", options.dtype},      {"iters", options.iters}, {"warmup", options.warmup}, {"results", results},
        {"avg_busbw_GBps", avg_busbw}, {"p2p", nullptr}};
    if (p2p_us)
      doc["p2p"] = {
          {"bytes", kP2pBytes}, {"time_us", *p2p_us}, {"GBps", static_cast<double>(kP2pBytes) / *p2p_us * 1e-3}};
    const std::filesystem::path path(options.json_path);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path);
    out << doc.dump(2) << "\n";
    if (!out) throw std::runtime_error("comm-bench: cannot write " + options.json_path);
    say("# wrote " + options.json_path);
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace dtlab
