// trainer.cpp: the training loop (see trainer.hpp).
#include "lab/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include <ATen/Parallel.h>

#include "analysis/cost/predict.hpp"
#include "analysis/cost/profile.hpp"
#include "analysis/stats.hpp"
#include "lab/comm/comm.hpp"
#include "lab/data.hpp"
#include "lab/dist/fault_injection.hpp"
#include "lab/instrument/clock.hpp"
#include "lab/instrument/cupti.hpp"
#include "lab/instrument/peak_flops.hpp"
#include "lab/instrument/step_analysis.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/instrument/trace.hpp"
#include "lab/memory.hpp"
#include "lab/model.hpp"
#include "lab/model_shape.hpp"
#include "lab/results.hpp"
#include "lab/results_schema.hpp"
#include "lab/train/schedule.hpp"

namespace dtlab {

namespace {

nlohmann::json phases_json(const PhaseTimes& ms) {
  nlohmann::json j = nlohmann::json::object();
  for (int p = 0; p < kPhaseCount; ++p) j[phase_key(static_cast<Phase>(p))] = ms[p];
  return j;
}

nlohmann::json step_json(const StepRecord& r, bool with_loss_scale) {
  nlohmann::json j = {{schema::kStep, r.step},
                      {schema::kLoss, r.loss},
                      {schema::kLr, r.lr},
                      {schema::kStepMs, r.step_ms},
                      {schema::kTokensPerS, r.tokens_per_s},
                      {schema::kCommWaitMs, r.comm_wait_ms},
                      {schema::kPhasesMs, phases_json(r.phases_ms)},
                      {schema::kCommMs, r.comm_ms},
                      {schema::kExposedCommMs, r.exposed_comm_ms},
                      {schema::kOverlapPct, r.overlap_pct}};
  if (r.trace_ms > 0) j[schema::kTraceMs] = r.trace_ms;
  j[schema::kGradNorm] = std::isfinite(r.grad_norm) ? nlohmann::json(r.grad_norm) : nlohmann::json(nullptr);
  if (with_loss_scale) {
    j[schema::kLossScale] = r.loss_scale;
    j[schema::kSkipped] = r.skipped;
  }
  return j;
}

// The dtype audit: what the strategy holds, and the dtypes each collective op actually carried.
nlohmann::json dtype_audit(const Strategy& strategy, World& world) {
  nlohmann::json audit = nlohmann::json::object();
  for (const auto& [what, dtype] : strategy.dtype_audit()) audit[what] = dtype;
  std::map<std::string, std::set<std::string>> by_op;
  for (Comm* comm : world.all_comms())
    for (const auto& r : comm->records())
      if (r.tag != "metric" && r.tag != "grad_norm" && r.tag != "full_state") by_op[r.op].insert(r.dtype);
  nlohmann::json collectives = nlohmann::json::object();
  for (const auto& [op, dtypes] : by_op) collectives[op] = std::vector<std::string>(dtypes.begin(), dtypes.end());
  audit["collectives"] = collectives;
  return audit;
}

// Count and bytes of this rank's collectives during training (records from `first_seq` on, per
// communicator: setup such as DDP's parameter broadcast is left out) by (op, group, algorithm, dtype),
// metrics excluded.
nlohmann::json collective_summary(World& world, int64_t steps, const std::map<Comm*, size_t>& first_seq) {
  std::map<std::string, std::pair<int64_t, int64_t>> totals;
  std::map<std::string, nlohmann::json> keys;
  for (Comm* comm : world.all_comms())
    for (const auto& r : comm->records()) {
      auto start = first_seq.find(comm);
      if (start != first_seq.end() && r.seq < static_cast<int64_t>(start->second)) continue;
      if (r.tag == "metric" || r.tag == "full_state") continue;
      const std::string key = r.op + "|" + r.group + "|" + r.algorithm + "|" + r.dtype;
      totals[key].first += 1;
      totals[key].second += r.bytes;
      keys[key] = {{"op", r.op},
                   {"group", r.group},
                   {"group_size", r.group_size},
                   {"algorithm", r.algorithm},
                   {"dtype", r.dtype}};
    }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, t] : totals) {
    nlohmann::json row = keys[key];
    row["count"] = t.first;
    row["bytes"] = t.second;
    row["bytes_per_step"] = steps > 0 ? static_cast<double>(t.second) / static_cast<double>(steps) : 0.0;
    out.push_back(row);
  }
  return out;
}

// Every rank's figures `fields` of `mine` in rank order, as [{rank, field: value, ...}]: one all-reduce of a
// [world x fields] table in which each rank fills its row. Collective: every rank calls it; result.json
// (rank 0) then carries all ranks. Integral fields are stored as integers.
nlohmann::json every_rank(const nlohmann::json& mine, const std::vector<const char*>& fields, bool integral,
                          World& world) {
  const int64_t n = static_cast<int64_t>(fields.size());
  std::vector<double> table(static_cast<size_t>(n * world.world_size()), 0.0);
  for (int64_t f = 0; f < n; ++f)
    if (mine.contains(fields[f])) table[static_cast<size_t>(world.rank() * n + f)] = mine[fields[f]].get<double>();
  if (world.world_size() > 1) {
    at::Tensor t = at::from_blob(table.data(), {static_cast<int64_t>(table.size())}, at::kDouble).clone();
    world.comm().all_reduce(t, "metric").wait();
    std::memcpy(table.data(), t.data_ptr<double>(), table.size() * sizeof(double));
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < world.world_size(); ++r) {
    nlohmann::json row = {{schema::kRank, r}};
    for (int64_t f = 0; f < n; ++f) {
      const double v = table[static_cast<size_t>(r * n + f)];
      row[fields[f]] = integral ? nlohmann::json(static_cast<int64_t>(v)) : nlohmann::json(v);
    }
    ranks.push_back(row);
  }
  return ranks;
}

// Every rank's memory figures (params, grads, optimizer, buffers, activations, tensor peak, RSS, HWM).
nlohmann::json memory_of_every_rank(const nlohmann::json& mine, World& world) {
  return every_rank(mine,
                    {schema::kParamsBytes, schema::kGradsBytes, schema::kOptimizerBytes, schema::kBuffersBytes,
                     schema::kActivationsBytes, schema::kTensorPeakBytes, schema::kRssBytes, schema::kHwmBytes},
                    true, world);
}

// The MFU denominator: the peak of the cores this job occupies, i.e. one core's best GEMM rate in the compute
// dtype (measured by local rank 0 of each node while the node's other ranks wait, so the probe has its core alone)
// times the cores in use (threads per rank x ranks per node, at most the node's cores, times the nodes). A training
// step's GEMMs are smaller than the probe's and share the cores with elementwise work, so MFU cannot exceed 100%.
struct MfuPeak {
  double tflops = 0;
  std::string source;
};

MfuPeak mfu_peak(const Config& config, World& world, int threads) {
  const std::string dtype = config.precision.param_dtype == "bf16"   ? "bfloat16"
                            : config.precision.param_dtype == "fp16" ? "float16"
                                                                     : "float32";
  const at::ScalarType st = dtype == "bfloat16" ? at::kBFloat16 : dtype == "float16" ? at::kHalf : at::kFloat;
  CorePeak mine;
  if (world.local_rank() == 0) mine = measure_core_peak_tflops(st, 0.1);
  const double per_core = world.all_reduce_max(mine.tflops);
  const double n = world.all_reduce_max(static_cast<double>(mine.n));
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int nodes = std::max(1, world.world_size() / std::max(1, world.local_world_size()));
  const int cores = std::min(hardware, threads * world.local_world_size()) * nodes;
  char source[200];
  std::snprintf(source, sizeof source, "%.0fx%.0f %s GEMM on one core: %.4g TFLOP/s x %d cores in use", n, n,
                dtype.c_str(), per_core, cores);
  return {per_core * cores, source};
}

// Records of every communicator issued since `cursor` (advanced), in issue order per communicator.
std::vector<CollectiveRecord> new_records(World& world, std::map<Comm*, size_t>& cursor) {
  std::vector<CollectiveRecord> out;
  for (Comm* comm : world.all_comms()) {
    auto recs = comm->records_since(cursor[comm]);
    cursor[comm] += recs.size();
    out.insert(out.end(), std::make_move_iterator(recs.begin()), std::make_move_iterator(recs.end()));
  }
  return out;
}

// Detaches the step profiler from the run's trace writer however train() exits.
struct ProfilerSession {
  ProfilerSession(bool nvtx, TraceWriter* trace) { StepProfiler::instance().configure(nvtx, trace); }
  ~ProfilerSession() { StepProfiler::instance().configure(true, nullptr); }
};

constexpr size_t kMaxCommRecords = 20000;  // result.json stays readable for long runs

// The trainer's loss sum over a strategy's data-parallel communicator (a DistWorld's all_reduce_sum on a group).
double sum_over(Comm& comm, double value) {
  at::Tensor t = at::full({1}, value, at::kDouble);
  comm.all_reduce(t, "metric").wait();
  return t.item<double>();
}

}  // namespace

std::string format_step_line(const StepRecord& r, int64_t total_steps) {
  char buf[320];
  int n = std::snprintf(buf, sizeof buf, "step %lld/%lld | loss %.4f | lr %.1e | %.1f ms | %.0f tok/s",
                        static_cast<long long>(r.step), static_cast<long long>(total_steps), r.loss, r.lr, r.step_ms,
                        r.tokens_per_s);
  if (r.tflops > 0)
    n +=
        std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), " | %.3g TFLOPS | mfu %.1f%%", r.tflops, r.mfu_pct);
  if (r.memory_bytes > 0)
    n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), " | mem %.2f GiB",
                       static_cast<double>(r.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  if (r.comm_ms > 0)
    std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), " | comm %.1f ms, %.1f exposed (overlap %.0f%%)",
                  r.comm_ms, r.exposed_comm_ms, r.overlap_pct);
  if (r.skipped) return std::string(buf) + " | skipped: non-finite gradients, loss scale now halved";
  return buf;
}

int configure_threads(const Config& config, const World& world) {
  int threads = static_cast<int>(config.train.threads);
  if (threads == 0) {
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    threads = std::max(1, cores / std::max(1, world.local_world_size()));
  }
  at::set_num_threads(threads);
  return threads;
}

TrainOutcome train(const Config& config, Strategy& strategy, World& world, const TrainOptions& options) {
  if (!config.model.trainable)
    throw std::invalid_argument("model.preset=" + config.model.preset +
                                " is a prediction-only shape (too large for this machine); use `dtlab predict`, "
                                "or a trainable preset (tiny | small | medium)");
  // A bad profile path fails before any work (and alike on every rank).
  std::optional<analysis::MachineProfile> profile;
  if (!config.instrument.profile.empty()) profile = analysis::load_profile(config.instrument.profile);
  validate_fault_injection();    // a malformed DTLAB_INJECT_* fails before any work
  install_counting_allocator();  // before the model exists, so every tensor of the run is counted
  const int threads = configure_threads(config, world);
  const TrainConfig& t = config.train;

  auto model = [&] {
    MemoryScope params(MemoryCategory::params);  // the strategy's wrap re-tags what it replaces or adds
    return std::make_shared<GPT>(config.model, t.seed);
  }();
  auto source = make_token_source(config.data, config.model.vocab_size);
  strategy.wrap(model, config, world);
  // The data each rank reads, the accumulation and the loss sum follow the strategy's data-parallel layout.
  const ParallelLayout layout = strategy.layout();
  if (static_cast<int64_t>(layout.dp_size) * layout.tp_size * layout.pp_size != world.world_size() ||
      t.global_batch % (t.micro_batch * layout.dp_size) != 0)
    throw std::logic_error("strategy " + strategy.id() + " reports dp " + std::to_string(layout.dp_size) + " x tp " +
                           std::to_string(layout.tp_size) + " x pp " + std::to_string(layout.pp_size) +
                           " ranks for world_size=" + std::to_string(world.world_size()) + " and global_batch=" +
                           std::to_string(t.global_batch) + ": its layout() and its spec disagree");
  const int64_t accumulation = t.global_batch / (t.micro_batch * layout.dp_size);
  Sampler sampler(*source, config.model.seq_len, t.global_batch, t.micro_batch, accumulation, layout.dp_rank,
                  layout.dp_size, config.data.seed, config.data.mask_token);
  const MfuPeak peak = mfu_peak(config, world, threads);
  const double peak_tflops = peak.tflops;
  reset_peak_cpu_tensor_memory();              // the peak of training, not of construction
  std::map<Comm*, size_t> first_training_seq;  // collectives before this are setup
  for (Comm* comm : world.all_comms()) first_training_seq[comm] = comm->record_count();
  std::map<Comm*, size_t> record_cursor = first_training_seq;

  const ModelCounts counts = model_counts(config.model);
  nlohmann::json result;
  result[schema::kSchemaVersion] = schema::kVersion;
  result[schema::kContext] = run_context(world.world_size(), world.launcher(), strategy.id(), options.command, threads);
  result[schema::kConfig] = to_json(config);
  result[schema::kModel] = {{schema::kParams, model->parameter_count()},
                            {schema::kFlopsPerToken, counts.flops_per_token},
                            {schema::kPreset, config.model.preset}};

  if (world.is_main() && options.print_config) {
    std::printf("%s", format_table(config).c_str());
    std::printf("model: %lld parameters, %.3g training FLOPs/token | strategy %s | world %d | %d threads/rank\n",
                static_cast<long long>(model->parameter_count()), counts.flops_per_token, strategy.id().c_str(),
                world.world_size(), threads);
    std::fflush(stdout);
  }

  std::unique_ptr<ResultsWriter> writer;
  if (!options.out_dir.empty()) writer = std::make_unique<ResultsWriter>(options.out_dir, world.rank());

  // Tracing: one writer per rank; lanes (tids) as in lab/instrument/trace.hpp: the main thread's phases, one lane
  // per communicator for its collectives (99: a communicator created after setup), CUDA streams from CUPTI.
  std::unique_ptr<TraceWriter> trace;
  std::map<std::string, int64_t> comm_tid;
  CuptiCollector cupti;
  if (config.instrument.trace && writer) {
    const std::string backend = world.world_size() == 1             ? "none"
                                : config.parallel.backend == "auto" ? "gloo"  // CPU tensors (see make_world)
                                                                    : config.parallel.backend;
    trace = std::make_unique<TraceWriter>(world.rank(), world.world_size(), backend);
    trace->thread_name(trace_tid::kMain, "main thread (phases)");
    int64_t tid = trace_tid::kCommGroupBase;
    for (Comm* comm : world.all_comms()) {
      comm_tid[comm->group_name()] = tid;
      trace->thread_name(tid++, "collectives " + comm->group_name());
    }
    if (config.instrument.cupti != "off") cupti.start();
  }
  ProfilerSession profiler_session(config.instrument.nvtx, trace.get());
  StepProfiler& profiler = StepProfiler::instance();

  TrainOutcome outcome;
  const bool dynamic_scaling = config.precision.loss_scale == "dynamic";
  const double tokens_per_step = static_cast<double>(t.global_batch * config.model.seq_len);
  const int64_t first_measured = t.steps > config.instrument.warmup_steps ? config.instrument.warmup_steps : 0;
  // rank 0's collective records, serialized as they come (one growing buffer, not thousands of small heap objects
  // among the training's large buffers: see lab/instrument/trace.hpp) and parsed once for result.json.
  std::string comm_records_text;
  size_t comm_record_count = 0;
  bool records_truncated = false;
  std::vector<PhaseSpan> last_spans;  // the last step's spans and collectives: the timeline of the report
  double last_start_us = 0, last_end_us = 0;
  nlohmann::json last_step_records;
  double cpu_s_at_measure = 0, wall_us_at_measure = 0;
  const auto run_start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < t.steps; ++step) {
    if (step == first_measured) {
      cpu_s_at_measure = process_cpu_seconds();
      wall_us_at_measure = lab_clock_us();
    }
    set_fault_step(step + 1);
    profiler.begin_step(step + 1);
    strategy.zero_grad();
    const double loss_weight = 1.0 / static_cast<double>(std::max<int64_t>(1, sampler.global_target_count(step)));
    double local_loss = 0.0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      Batch batch;
      {
        ScopedPhase data(Phase::data, "batch-generator");
        MemoryScope inputs(MemoryCategory::activations);  // the micro-batch's tokens, as the activation model counts
        batch = sampler.batch(step, micro);
      }
      MemoryScope activations(MemoryCategory::activations);  // strategies tag their own buffers inside
      local_loss += strategy.forward_backward(batch, loss_weight, micro == accumulation - 1);
    }
    {
      MemoryScope buffers(MemoryCategory::buffers);
      strategy.finish_gradients();  // its blocking waits are comm_wait spans (lab/comm); the rest is `other`
    }
    const double loss =
        layout.dp_comm != nullptr ? sum_over(*layout.dp_comm, local_loss) : world.all_reduce_sum(local_loss);
    if (!std::isfinite(loss))
      throw TrainingError("training: loss is " + std::string(std::isnan(loss) ? "nan" : "inf") + " at step " +
                          std::to_string(step + 1) + "/" + std::to_string(t.steps) +
                          "; stopping (lower train.lr, enable train.grad_clip, or check the data)");
    const double grad_norm = std::sqrt(strategy.grad_sum_of_squares());
    // The norm is global (agreed by every rank), so every rank stops here together. With dynamic loss scaling a
    // non-finite norm is expected: the strategy skips the step and halves the scale.
    if (!std::isfinite(grad_norm) && !dynamic_scaling)
      throw TrainingError("training: gradient norm is " + std::string(std::isnan(grad_norm) ? "nan" : "inf") +
                          " at step " + std::to_string(step + 1) + "/" + std::to_string(t.steps) + " (loss " +
                          std::to_string(loss) +
                          "); stopping before the optimizer spreads it into the parameters (lower train.lr, enable "
                          "train.grad_clip, use precision.loss_scale=dynamic for fp16, or check the data)");
    if (t.grad_clip > 0.0 && grad_norm > t.grad_clip) strategy.scale_gradients(t.grad_clip / (grad_norm + 1e-6));
    const double lr = learning_rate(t, step);
    inject_delay("before_optimizer", world.rank());
    {
      ScopedPhase optimizer(Phase::optimizer, "optimizer-step");
      strategy.optimizer_step(lr);
    }
    profiler.end_step();
    const double step_ms = (profiler.step_end_us() - profiler.step_start_us()) / 1000.0;
    const StepComm comm =
        analyse_step_comm(profiler.spans(), new_records(world, record_cursor), step + 1, profiler.step_end_us());

    StepRecord record;
    record.step = step + 1;
    record.loss = loss;
    record.lr = lr;
    record.grad_norm = grad_norm;
    record.step_ms = step_ms;
    record.tokens_per_s = tokens_per_step / (step_ms / 1000.0);
    record.phases_ms = profiler.phase_ms();
    record.comm_wait_ms = record.phases_ms[static_cast<int>(Phase::comm_wait)];
    record.comm_ms = comm.comm_ms;
    record.exposed_comm_ms = comm.exposed_ms;
    record.overlap_pct = comm.overlap_pct;
    record.tflops = counts.flops_per_token * record.tokens_per_s / 1e12;
    record.mfu_pct = peak_tflops > 0 ? 100.0 * record.tflops / peak_tflops : 0.0;
    record.memory_bytes = cpu_tensor_memory().peak_bytes;
    record.loss_scale = strategy.loss_scale();
    record.skipped = strategy.step_skipped();

    for (const auto& r : comm.records) {
      if (trace) {
        const double trace_start_us = lab_clock_us();
        const std::string group = r["group"];
        trace->span(collective_span_name(r["op"], r["tag"]), trace_cat::kCpuOp,
                    comm_tid.count(group) ? comm_tid[group] : trace_tid::kCommGroupBase - 1,
                    r[schema::kStartUs].get<double>(), r[schema::kTimeUs].get<double>(), r);
        profiler.add_trace_us(lab_clock_us() - trace_start_us);
      }
      if (comm_record_count < kMaxCommRecords) {
        if (comm_record_count++ > 0) comm_records_text += ',';
        comm_records_text += r.dump();
      } else {
        records_truncated = true;
      }
    }
    if (step + 1 == t.steps) {
      last_spans = profiler.spans();
      last_start_us = profiler.step_start_us();
      last_end_us = profiler.step_end_us();
      last_step_records = comm.records;
    }
    record.trace_ms = trace ? profiler.trace_ms() : 0.0;
    outcome.steps.push_back(record);
    if (writer) writer->append_step(step_json(record, dynamic_scaling));
    if (world.is_main() && options.print_steps &&
        ((step + 1) % config.instrument.log_every == 0 || step + 1 == t.steps)) {
      std::printf("%s\n", format_step_line(record, t.steps).c_str());
      std::fflush(stdout);
    }
    if (options.after_step) options.after_step(step + 1, strategy);
    inject_fault("step_end", world.rank());
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  const double cpu_util_pct =
      100.0 * (process_cpu_seconds() - cpu_s_at_measure) / std::max(1e-9, (lab_clock_us() - wall_us_at_measure) / 1e6);

  // Summary over steps after warm-up (all steps if the run is shorter than the warm-up).
  std::vector<double> measured_ms, measured_wait_ms, measured_overlap, measured_trace_ms;
  std::array<std::vector<double>, kPhaseCount> measured_phases;
  double comm_ms_sum = 0, exposed_ms_sum = 0;
  for (const auto& r : outcome.steps)
    if (r.step > first_measured) {
      measured_ms.push_back(r.step_ms);
      measured_wait_ms.push_back(r.comm_wait_ms);
      measured_overlap.push_back(r.overlap_pct);
      measured_trace_ms.push_back(r.trace_ms);
      for (int p = 0; p < kPhaseCount; ++p) measured_phases[p].push_back(r.phases_ms[p]);
      comm_ms_sum += r.comm_ms;
      exposed_ms_sum += r.exposed_comm_ms;
    }
  double total_ms = 0.0;
  for (double ms : measured_ms) total_ms += ms;
  const double measured_steps = static_cast<double>(measured_ms.size());
  const double tokens_per_s = tokens_per_step * measured_steps / (total_ms / 1000.0);
  const double tflops = counts.flops_per_token * tokens_per_s / 1e12;
  const nlohmann::json step_stats = distribution(measured_ms);
  nlohmann::json phase_stats = nlohmann::json::object();
  for (int p = 0; p < kPhaseCount; ++p)
    phase_stats[phase_key(static_cast<Phase>(p))] = distribution(measured_phases[p]);
  result[schema::kSteps] = nlohmann::json::array();
  for (const auto& r : outcome.steps) result[schema::kSteps].push_back(step_json(r, dynamic_scaling));
  result[schema::kSummary] = {{schema::kTokensPerS, tokens_per_s},
                              {schema::kTokensPerSPerRank, tokens_per_s / world.world_size()},
                              {schema::kStepMsMedian, step_stats["median"]},
                              {schema::kStepMsMin, step_stats["min"]},
                              {schema::kStepMsMax, step_stats["max"]},
                              {schema::kStepMsMean, step_stats["mean"]},
                              {schema::kStepMsP95, step_stats["p95"]},
                              {schema::kPhasesMs, phase_stats},
                              {schema::kCommWaitMsMedian, analysis::median_or_zero(measured_wait_ms)},
                              {schema::kOverlapPctMedian, analysis::median_or_zero(measured_overlap)},
                              {schema::kFinalLoss, outcome.steps.empty() ? 0.0 : outcome.steps.back().loss},
                              {schema::kTflops, tflops},
                              {schema::kGemmTflops, peak_tflops},
                              {schema::kMfuPct, peak_tflops > 0 ? 100.0 * tflops / peak_tflops : 0.0},
                              {schema::kMfuPeakSource, peak.source},
                              {schema::kPhaseClock, profiler.phase_clock()},
                              {schema::kCpuUtilPct, cpu_util_pct},
                              {schema::kWallS, wall_s},
                              {schema::kMeasuredSteps, static_cast<int64_t>(measured_ms.size())}};
  if (trace) {  // the direct cost of tracing: time spent writing events, per step, over the median step
    result[schema::kSummary][schema::kTraceMsMedian] = analysis::median_or_zero(measured_trace_ms);
    result[schema::kSummary][schema::kTraceOverheadPct] =
        100.0 * analysis::median_or_zero(measured_trace_ms) / std::max(1e-9, step_stats["median"].get<double>());
  }
  result[schema::kMemory] = memory_report(strategy.state_bytes(), world.rank());
  result[schema::kMemory][schema::kRanks] = memory_of_every_rank(result[schema::kMemory], world);
  result[schema::kSummary][schema::kMemoryMaxAllocatedBytes] = result[schema::kMemory][schema::kTensorPeakBytes];
  result[schema::kSummary][schema::kMemoryMaxReservedBytes] = result[schema::kMemory][schema::kHwmBytes];
  result[schema::kDtypes] = dtype_audit(strategy, world);
  result[schema::kCollectives] = collective_summary(world, t.steps, first_training_seq);
  const double denom = std::max(1.0, measured_steps);
  const nlohmann::json my_comm = {
      {schema::kCommMsPerStep, comm_ms_sum / denom},
      {schema::kExposedMsPerStep, exposed_ms_sum / denom},
      {schema::kOverlapPct, comm_ms_sum > 0 ? 100.0 * (1.0 - exposed_ms_sum / comm_ms_sum) : 0.0},
      {schema::kCpuUtilPct, cpu_util_pct}};
  result[schema::kComm] = {{schema::kRecords, nlohmann::json::parse("[" + comm_records_text + "]")},
                           {schema::kRecordsTruncated, records_truncated},
                           {schema::kRanks, every_rank(my_comm,
                                                       {schema::kCommMsPerStep, schema::kExposedMsPerStep,
                                                        schema::kOverlapPct, schema::kCpuUtilPct},
                                                       false, world)}};
  result[schema::kPrediction] = analysis::predict(config, profile ? &*profile : nullptr, world.rank());
  if (writer) {
    if (!outcome.steps.empty())
      write_file_atomic(writer->rank_dir() + "/" + schema::kTimelineFile,
                        step_timeline(world.rank(), outcome.steps.back().step, last_start_us, last_end_us, last_spans,
                                      last_step_records)
                            .dump(1));
    if (trace) {
      cupti.stop_into(*trace);
      trace->write(writer->rank_dir() + "/" + schema::kTraceFile);
    }
  }
  if (writer && world.is_main()) writer->write_result(result);
  outcome.result = std::move(result);
  return outcome;
}

}  // namespace dtlab
