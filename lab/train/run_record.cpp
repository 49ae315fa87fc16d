// run_record.cpp: step lines and result.json assembly (see run_record.hpp).
#include "lab/train/run_record.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "lab/comm/comm.hpp"
#include "lab/instrument/step_analysis.hpp"
#include "lab/memory.hpp"
#include "lab/results_schema.hpp"
#include "lab/stats.hpp"
#include "lab/train/strategy.hpp"
#include "lab/world.hpp"

namespace dtlab {

namespace {

nlohmann::json phases_json(const PhaseTimes& ms) {
  nlohmann::json j = nlohmann::json::object();
  for (int p = 0; p < kPhaseCount; ++p) j[phase_key(static_cast<Phase>(p))] = ms[p];
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
      const std::string key = r.op + "|" + r.group + "|" + r.level + "|" + r.algorithm + "|" + r.dtype;
      totals[key].first += 1;
      totals[key].second += r.bytes;
      keys[key] = {{"op", r.op},
                   {"group", r.group},
                   {"level", r.level},
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

// Per measured step the least comm wait of any rank: the wait of the rank that reached the collectives last, which
// waited for the communication only (the others also waited for it, e.g. for a peer that shares their core). One
// all-reduce of a [world x steps] table; collective, every rank calls it. In the order of `steps`, measured ones only.
std::vector<double> least_comm_waits(const std::vector<StepRecord>& steps, const RunTotals& totals, World& world) {
  std::vector<double> mine;
  for (const auto& r : steps)
    if (r.step > totals.warmup_steps) mine.push_back(r.comm_wait_ms);
  const size_t n = mine.size();
  std::vector<double> table(n * static_cast<size_t>(world.world_size()), 0.0);
  std::copy(mine.begin(), mine.end(), table.begin() + static_cast<std::ptrdiff_t>(n * world.rank()));
  at::Tensor t = at::from_blob(table.data(), {static_cast<int64_t>(table.size())}, at::kDouble).clone();
  world.comm().all_reduce(t, "metric").wait();
  std::memcpy(table.data(), t.data_ptr<double>(), table.size() * sizeof(double));
  std::vector<double> least(mine);
  for (int r = 0; r < world.world_size(); ++r)
    for (size_t i = 0; i < n; ++i) least[i] = std::min(least[i], table[static_cast<size_t>(r) * n + i]);
  return least;
}

// Every rank's median forward, backward and comm_wait over the measured steps (from its summary.phases_ms).
nlohmann::json phases_of_every_rank(const nlohmann::json& summary, World& world) {
  nlohmann::json mine = nlohmann::json::object();
  const nlohmann::json& phases = summary.value(schema::kPhasesMs, nlohmann::json::object());
  const auto median_of = [&](const char* phase) {
    const auto it = phases.find(phase);
    return it != phases.end() && it->contains("median") ? it->at("median").get<double>() : 0.0;
  };
  mine[schema::kForwardMs] = median_of("forward");
  mine[schema::kBackwardMs] = median_of("backward");
  mine[schema::kCommWaitMs] = median_of("comm_wait");
  return every_rank(mine, {schema::kForwardMs, schema::kBackwardMs, schema::kCommWaitMs}, false, world);
}

// Every rank's memory figures (params, grads, optimizer, buffers, activations, tensor peak, host state and the
// device-side peak, RSS, HWM).
nlohmann::json memory_of_every_rank(const nlohmann::json& mine, World& world) {
  return every_rank(mine,
                    {schema::kParamsBytes, schema::kGradsBytes, schema::kOptimizerBytes, schema::kBuffersBytes,
                     schema::kActivationsBytes, schema::kTensorPeakBytes, schema::kHostBytes,
                     schema::kDeviceSidePeakBytes, schema::kRssBytes, schema::kHwmBytes},
                    true, world);
}

// result.json "summary": throughput, step-time distribution, phases, MFU and comm medians over the steps after
// warm-up (all steps when the run is shorter than the warm-up).
nlohmann::json run_summary(const std::vector<StepRecord>& steps, const RunTotals& totals, int world_size) {
  std::vector<double> measured_ms, measured_wait_ms, measured_overlap, measured_trace_ms;
  std::array<std::vector<double>, kPhaseCount> measured_phases;
  for (const auto& r : steps)
    if (r.step > totals.warmup_steps) {
      measured_ms.push_back(r.step_ms);
      measured_wait_ms.push_back(r.comm_wait_ms);
      measured_overlap.push_back(r.overlap_pct);
      measured_trace_ms.push_back(r.trace_ms);
      for (int p = 0; p < kPhaseCount; ++p) measured_phases[p].push_back(r.phases_ms[p]);
    }
  double total_ms = 0.0;
  for (double ms : measured_ms) total_ms += ms;
  const double measured_steps = static_cast<double>(measured_ms.size());
  const double tokens_per_s = totals.tokens_per_step * measured_steps / (total_ms / 1000.0);
  const double tflops = totals.flops_per_token * tokens_per_s / 1e12;
  const double peak = totals.peak_tflops;
  const nlohmann::json step_stats = distribution(measured_ms);
  nlohmann::json phase_stats = nlohmann::json::object();
  for (int p = 0; p < kPhaseCount; ++p)
    phase_stats[phase_key(static_cast<Phase>(p))] = distribution(measured_phases[p]);
  nlohmann::json summary = {{schema::kTokensPerS, tokens_per_s},
                            {schema::kTokensPerSPerRank, tokens_per_s / world_size},
                            {schema::kStepMsMedian, step_stats["median"]},
                            {schema::kStepMsMin, step_stats["min"]},
                            {schema::kStepMsMax, step_stats["max"]},
                            {schema::kStepMsMean, step_stats["mean"]},
                            {schema::kStepMsP95, step_stats["p95"]},
                            {schema::kPhasesMs, phase_stats},
                            {schema::kCommWaitMsMedian, median_or_zero(measured_wait_ms)},
                            {schema::kOverlapPctMedian, median_or_zero(measured_overlap)},
                            {schema::kFinalLoss, steps.empty() ? 0.0 : steps.back().loss},
                            {schema::kTflops, tflops},
                            {schema::kGemmTflops, peak},
                            {schema::kMfuPct, peak > 0 ? 100.0 * tflops / peak : 0.0},
                            {schema::kMfuPeakSource, totals.peak_source},
                            {schema::kPhaseClock, totals.phase_clock},
                            {schema::kCpuUtilPct, totals.cpu_util_pct},
                            {schema::kWallS, totals.wall_s},
                            {schema::kMeasuredSteps, static_cast<int64_t>(measured_ms.size())}};
  if (totals.traced) {  // the direct cost of tracing: time spent writing events, per step, over the median step
    summary[schema::kTraceMsMedian] = median_or_zero(measured_trace_ms);
    summary[schema::kTraceOverheadPct] =
        100.0 * median_or_zero(measured_trace_ms) / std::max(1e-9, step_stats["median"].get<double>());
  }
  return summary;
}

// result.json "comm": rank 0's records and every rank's comm time, exposed time and overlap per measured step.
nlohmann::json run_comm(const std::vector<StepRecord>& steps, const RunTotals& totals, const CommRecordLog& comm_log,
                        World& world) {
  double comm_ms_sum = 0, exposed_ms_sum = 0, measured_steps = 0;
  for (const auto& r : steps)
    if (r.step > totals.warmup_steps) {
      comm_ms_sum += r.comm_ms;
      exposed_ms_sum += r.exposed_comm_ms;
      measured_steps += 1;
    }
  const double denom = std::max(1.0, measured_steps);
  const nlohmann::json my_comm = {
      {schema::kCommMsPerStep, comm_ms_sum / denom},
      {schema::kExposedMsPerStep, exposed_ms_sum / denom},
      {schema::kOverlapPct, comm_ms_sum > 0 ? 100.0 * (1.0 - exposed_ms_sum / comm_ms_sum) : 0.0},
      {schema::kCpuUtilPct, totals.cpu_util_pct}};
  return {{schema::kRecords, comm_log.records()},
          {schema::kRecordsTruncated, comm_log.truncated()},
          {schema::kRanks,
           every_rank(my_comm,
                      {schema::kCommMsPerStep, schema::kExposedMsPerStep, schema::kOverlapPct, schema::kCpuUtilPct},
                      false, world)}};
}

}  // namespace

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
  if (r.mfu_pct > 0) j[schema::kMfuPct] = r.mfu_pct;
  j[schema::kTensorPeakBytes] = r.memory_bytes;
  if (r.trace_ms > 0) j[schema::kTraceMs] = r.trace_ms;
  j[schema::kGradNorm] = std::isfinite(r.grad_norm) ? nlohmann::json(r.grad_norm) : nlohmann::json(nullptr);
  if (with_loss_scale) {
    j[schema::kLossScale] = r.loss_scale;
    j[schema::kSkipped] = r.skipped;
  }
  return j;
}

void write_tensorboard_step(TensorBoardWriter& tensorboard, const nlohmann::json& step) {
  // TensorBoard tag <- the step line's key: grouped so TensorBoard shows one section per kind of figure.
  static const std::pair<const char*, const char*> kTags[] = {
      {"train/loss", schema::kLoss},
      {"train/lr", schema::kLr},
      {"train/grad_norm", schema::kGradNorm},
      {"train/loss_scale", schema::kLossScale},
      {"perf/step_ms", schema::kStepMs},
      {"perf/tokens_per_s", schema::kTokensPerS},
      {"perf/mfu_pct", schema::kMfuPct},
      {"memory/tensor_peak_bytes", schema::kTensorPeakBytes},
      {"comm/comm_ms", schema::kCommMs},
      {"comm/exposed_comm_ms", schema::kExposedCommMs},
      {"comm/overlap_pct", schema::kOverlapPct},
  };
  const int64_t n = step.at(schema::kStep).get<int64_t>();
  for (const auto& [tag, key] : kTags) {
    const auto it = step.find(key);
    if (it != step.end() && it->is_number()) tensorboard.scalar(tag, n, it->get<double>());
  }
  tensorboard.flush();
}

void CommRecordLog::add(const nlohmann::json& record) {
  if (count_ >= kMaxRecords) {
    truncated_ = true;
    return;
  }
  if (count_++ > 0) text_ += ',';
  text_ += record.dump();
}

void add_run_results(nlohmann::json& result, const std::vector<StepRecord>& steps, const RunTotals& totals,
                     const CommRecordLog& comm_log, const std::map<Comm*, size_t>& first_training_seq,
                     const Strategy& strategy, World& world) {
  const std::vector<double> least_waits =
      world.world_size() > 1 ? least_comm_waits(steps, totals, world) : std::vector<double>{};
  result[schema::kSteps] = nlohmann::json::array();
  size_t measured = 0;
  for (const auto& r : steps) {
    nlohmann::json step = step_json(r, totals.dynamic_scaling);
    if (r.step > totals.warmup_steps && measured < least_waits.size())
      step[schema::kCommWaitLeastMs] = least_waits[measured++];
    result[schema::kSteps].push_back(std::move(step));
  }
  result[schema::kSummary] = run_summary(steps, totals, world.world_size());
  if (world.world_size() > 1) {
    result[schema::kSummary][schema::kCommWaitLeastMsMedian] = median_or_zero(least_waits);
    result[schema::kSummary][schema::kPhasesByRank] = phases_of_every_rank(result[schema::kSummary], world);
  }
  result[schema::kMemory] = memory_report(strategy.state_bytes(), world.rank());
  result[schema::kMemory][schema::kRanks] = memory_of_every_rank(result[schema::kMemory], world);
  result[schema::kSummary][schema::kMemoryMaxAllocatedBytes] = result[schema::kMemory][schema::kTensorPeakBytes];
  result[schema::kSummary][schema::kMemoryMaxReservedBytes] = result[schema::kMemory][schema::kHwmBytes];
  result[schema::kDtypes] = dtype_audit(strategy, world);
  result[schema::kCollectives] = collective_summary(world, totals.planned_steps, first_training_seq);
  result[schema::kComm] = run_comm(steps, totals, comm_log, world);
}

}  // namespace dtlab
