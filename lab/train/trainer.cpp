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

#include "lab/comm/comm.hpp"
#include "lab/data.hpp"
#include "lab/dist/fault_injection.hpp"
#include "lab/memory.hpp"
#include "lab/model.hpp"
#include "lab/model_shape.hpp"
#include "lab/results.hpp"
#include "lab/results_schema.hpp"
#include "lab/train/schedule.hpp"

namespace dtlab {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json step_json(const StepRecord& r, bool with_loss_scale) {
  nlohmann::json j = {{schema::kStep, r.step},
                      {schema::kLoss, r.loss},
                      {schema::kLr, r.lr},
                      {schema::kStepMs, r.step_ms},
                      {schema::kTokensPerS, r.tokens_per_s},
                      {schema::kCommWaitMs, r.comm_wait_ms}};
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
nlohmann::json collective_summary(World& world, int64_t steps, const std::map<Comm*, int64_t>& first_seq) {
  std::map<std::string, std::pair<int64_t, int64_t>> totals;
  std::map<std::string, nlohmann::json> keys;
  for (Comm* comm : world.all_comms())
    for (const auto& r : comm->records()) {
      auto start = first_seq.find(comm);
      if (start != first_seq.end() && r.seq < start->second) continue;
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

// Every rank's numeric memory figures (params, grads, optimizer, buffers, activations, tensor peak,
// RSS, HWM) in rank order: one all-reduce of a [world x fields] table in which each rank fills its row.
// Collective: every rank calls it; result.json (rank 0) then carries all ranks.
nlohmann::json memory_of_every_rank(const nlohmann::json& mine, World& world) {
  static const char* kFields[] = {schema::kParamsBytes,  schema::kGradsBytes,       schema::kOptimizerBytes,
                                  schema::kBuffersBytes, schema::kActivationsBytes, schema::kTensorPeakBytes,
                                  schema::kRssBytes,     schema::kHwmBytes};
  const int64_t n = static_cast<int64_t>(std::size(kFields));
  std::vector<double> table(static_cast<size_t>(n * world.world_size()), 0.0);
  for (int64_t f = 0; f < n; ++f)
    if (mine.contains(kFields[f])) table[static_cast<size_t>(world.rank() * n + f)] = mine[kFields[f]].get<double>();
  if (world.world_size() > 1) {
    at::Tensor t = at::from_blob(table.data(), {static_cast<int64_t>(table.size())}, at::kDouble).clone();
    world.comm().all_reduce(t, "metric").wait();
    std::memcpy(table.data(), t.data_ptr<double>(), table.size() * sizeof(double));
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < world.world_size(); ++r) {
    nlohmann::json row = {{schema::kRank, r}};
    for (int64_t f = 0; f < n; ++f) row[kFields[f]] = static_cast<int64_t>(table[static_cast<size_t>(r * n + f)]);
    ranks.push_back(row);
  }
  return ranks;
}

}  // namespace

std::string format_step_line(const StepRecord& r, int64_t total_steps) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "step %lld/%lld | loss %.4f | lr %.1e | %.1f ms | %.0f tok/s",
                static_cast<long long>(r.step), static_cast<long long>(total_steps), r.loss, r.lr, r.step_ms,
                r.tokens_per_s);
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
  install_counting_allocator();  // before the model exists, so every tensor of the run is counted
  const int threads = configure_threads(config, world);
  const TrainConfig& t = config.train;
  const int64_t accumulation = t.global_batch / (t.micro_batch * world.world_size());

  auto model = std::make_shared<GPT>(config.model, t.seed);
  auto source = make_token_source(config.data, config.model.vocab_size);
  Sampler sampler(*source, config.model.seq_len, t.global_batch, t.micro_batch, accumulation, world.rank(),
                  world.world_size(), config.data.seed, config.data.mask_token);
  strategy.wrap(model, config, world);
  reset_peak_cpu_tensor_memory();               // the peak of training, not of construction
  std::map<Comm*, int64_t> first_training_seq;  // collectives before this are setup
  for (Comm* comm : world.all_comms()) first_training_seq[comm] = static_cast<int64_t>(comm->record_count());

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

  TrainOutcome outcome;
  const bool dynamic_scaling = config.precision.loss_scale == "dynamic";
  const double tokens_per_step = static_cast<double>(t.global_batch * config.model.seq_len);
  const auto run_start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < t.steps; ++step) {
    const auto step_start = std::chrono::steady_clock::now();
    strategy.zero_grad();
    const double loss_weight = 1.0 / static_cast<double>(std::max<int64_t>(1, sampler.global_target_count(step)));
    double local_loss = 0.0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      Batch batch = sampler.batch(step, micro);
      local_loss += strategy.forward_backward(batch, loss_weight, micro == accumulation - 1);
    }
    const auto wait_start = std::chrono::steady_clock::now();
    strategy.finish_gradients();
    const double comm_wait_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wait_start).count();
    const double loss = world.all_reduce_sum(local_loss);
    if (!std::isfinite(loss))
      throw TrainingError("training: loss is " + std::string(std::isnan(loss) ? "nan" : "inf") + " at step " +
                          std::to_string(step + 1) + "/" + std::to_string(t.steps) +
                          "; stopping (lower train.lr, enable train.grad_clip, or check the data)");
    const double grad_norm = std::sqrt(strategy.grad_sum_of_squares());
    if (t.grad_clip > 0.0 && grad_norm > t.grad_clip) strategy.scale_gradients(t.grad_clip / (grad_norm + 1e-6));
    const double lr = learning_rate(t, step);
    inject_delay("before_optimizer", world.rank());
    strategy.optimizer_step(lr);
    const double step_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start).count();

    StepRecord record{step + 1,
                      loss,
                      lr,
                      grad_norm,
                      step_ms,
                      tokens_per_step / (step_ms / 1000.0),
                      comm_wait_ms,
                      strategy.loss_scale(),
                      strategy.step_skipped()};
    outcome.steps.push_back(record);
    if (writer) writer->append_step(step_json(record, dynamic_scaling));
    if (world.is_main() && options.print_steps &&
        ((step + 1) % config.instrument.log_every == 0 || step + 1 == t.steps)) {
      std::printf("%s\n", format_step_line(record, t.steps).c_str());
      std::fflush(stdout);
    }
    if (options.after_step) options.after_step(step + 1, strategy);
    inject_fault(step + 1, world.rank());
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();

  // Summary over steps after warm-up (all steps if the run is shorter than the warm-up).
  std::vector<double> measured_ms, measured_wait_ms;
  for (const auto& r : outcome.steps)
    if (r.step > config.instrument.warmup_steps ||
        static_cast<int64_t>(outcome.steps.size()) <= config.instrument.warmup_steps) {
      measured_ms.push_back(r.step_ms);
      measured_wait_ms.push_back(r.comm_wait_ms);
    }
  double total_ms = 0.0;
  for (double ms : measured_ms) total_ms += ms;
  const double tokens_per_s = tokens_per_step * static_cast<double>(measured_ms.size()) / (total_ms / 1000.0);
  result[schema::kSteps] = nlohmann::json::array();
  for (const auto& r : outcome.steps) result[schema::kSteps].push_back(step_json(r, dynamic_scaling));
  result[schema::kSummary] = {{schema::kTokensPerS, tokens_per_s},
                              {schema::kStepMsMedian, median_of(measured_ms)},
                              {schema::kStepMsMin, *std::min_element(measured_ms.begin(), measured_ms.end())},
                              {schema::kStepMsMax, *std::max_element(measured_ms.begin(), measured_ms.end())},
                              {schema::kCommWaitMsMedian, median_of(measured_wait_ms)},
                              {schema::kFinalLoss, outcome.steps.empty() ? 0.0 : outcome.steps.back().loss},
                              {schema::kTflops, counts.flops_per_token * tokens_per_s / 1e12},
                              {schema::kWallS, wall_s},
                              {schema::kMeasuredSteps, static_cast<int64_t>(measured_ms.size())}};
  result[schema::kMemory] = memory_report(strategy.state_bytes(), world.rank());
  result[schema::kMemory][schema::kRanks] = memory_of_every_rank(result[schema::kMemory], world);
  result[schema::kDtypes] = dtype_audit(strategy, world);
  result[schema::kCollectives] = collective_summary(world, t.steps, first_training_seq);
  if (writer && world.is_main()) writer->write_result(result);
  outcome.result = std::move(result);
  return outcome;
}

}  // namespace dtlab
