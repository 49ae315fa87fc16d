// accuracy.cpp: predicted vs measured per run, and the evaluation of the accuracy targets; see accuracy.hpp. The
// printed report of them is accuracy_print.cpp.
#include "analysis/accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lab/results_schema.hpp"
#include "lab/stats.hpp"

namespace dtlab::analysis {
namespace {
using nlohmann::json;

// Keys inside the "prediction" object (owned by analysis/cost/predict.hpp; named here as this file reads them).
using schema::kPrediction;
constexpr const char* kLabel = "label";
constexpr const char* kProfile = "profile";
constexpr const char* kProfileKind = "profile_kind";
constexpr const char* kMemoryBytes = "memory_bytes";
constexpr const char* kLogits = "logits";
constexpr const char* kDevicePeak = "device_peak";
constexpr const char* kPeakTimingDependent = "peak_timing_dependent";
constexpr const char* kPredictionNotes = "notes";
constexpr const char* kComputeMs = "compute_ms";
constexpr const char* kOptimizerMs = "optimizer_ms";
constexpr const char* kExposedMs = "exposed_ms";
constexpr const char* kOverlapLostInNodeMs = "overlap_lost_in_node_ms";

std::string source_of(const RunResult& run) { return run.dir + "/" + schema::kResultFile; }

// A number at obj[key]: nullopt when absent or null; AnalysisError naming the key when not a number.
std::optional<double> opt_number(const json& obj, const std::string& key, const std::string& source,
                                 const std::string& path) {
  if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
  const json& v = obj.at(key);
  if (!v.is_number()) {
    throw AnalysisError(source + ": key \"" + path + key + "\" must be a number or null, got " + v.type_name());
  }
  return v.get<double>();
}

// summary.phases_ms.<phase>.median, NaN when absent.
double phase_median(const json& phases, const char* phase, const std::string& source) {
  if (!phases.contains(phase)) return std::numeric_limits<double>::quiet_NaN();
  return opt_number(phases.at(phase), "median", source, std::string("summary.phases_ms.") + phase + ".")
      .value_or(std::numeric_limits<double>::quiet_NaN());
}

// The measured step parts from the trainer's phase medians, or nullopt when the run recorded none.
std::optional<StepParts> measured_step_parts(const json& raw, const std::string& source) {
  if (!raw.contains(schema::kSummary) || !raw.at(schema::kSummary).is_object()) return std::nullopt;
  const json& summary = raw.at(schema::kSummary);
  if (!summary.contains(schema::kPhasesMs) || !summary.at(schema::kPhasesMs).is_object()) return std::nullopt;
  const json& phases = summary.at(schema::kPhasesMs);
  StepParts m;
  m.compute_ms = phase_median(phases, "forward", source) + phase_median(phases, "backward", source);
  m.exposed_comm_ms = phase_median(phases, "comm_wait", source);
  m.optimizer_ms = phase_median(phases, "optimizer", source);
  return m;
}

std::string opt_string(const json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key) || !obj.at(key).is_string()) return "";
  return obj.at(key).get<std::string>();
}

// The measured memory object of `rank`: memory.ranks[i] with that rank, else memory itself (rank 0's).
const json* measured_memory(const json& raw, int rank) {
  if (!raw.contains(schema::kMemory) || !raw.at(schema::kMemory).is_object()) return nullptr;
  const json& mem = raw.at(schema::kMemory);
  if (mem.contains(schema::kRanks) && mem.at(schema::kRanks).is_array()) {
    for (const json& r : mem.at(schema::kRanks)) {
      if (r.is_object() && r.contains(schema::kRank) && r.at(schema::kRank).is_number_integer() &&
          r.at(schema::kRank).get<int>() == rank) {
        return &r;
      }
    }
  }
  return &mem;
}

}  // namespace

double PredictedMeasured::error_pct() const {
  if (measured == 0) return predicted == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return (predicted - measured) / measured * 100.0;
}

std::optional<double> CrossoverCheck::factor() const {
  if (measured.kind != Crossing::within || predicted.kind != Crossing::within || !(measured.rate_mbps > 0))
    return std::nullopt;
  return predicted.rate_mbps / measured.rate_mbps;
}

std::optional<RunComparison> compare_run(const RunResult& run, const std::string& scenario) {
  const json& raw = run.raw;
  if (!raw.is_object() || !raw.contains(kPrediction) || raw.at(kPrediction).is_null()) return std::nullopt;
  const std::string source = source_of(run);
  const json& p = raw.at(kPrediction);
  if (!p.is_object()) {
    throw AnalysisError(source + ": key \"prediction\" must be an object, got " + std::string(p.type_name()));
  }
  RunComparison c;
  c.scenario = scenario;
  c.run = run.name;
  c.strategy = opt_string(p, schema::kStrategy);
  if (c.strategy.empty()) c.strategy = run.strategy;
  c.world_size = static_cast<int>(opt_number(p, schema::kWorldSize, source, "prediction.").value_or(run.world_size));
  c.rank = static_cast<int>(opt_number(p, schema::kRank, source, "prediction.").value_or(0));
  c.label = opt_string(p, kLabel);
  if (c.label.empty()) c.label = "prediction";
  c.profile = opt_string(p, kProfile);
  c.profile_kind = opt_string(p, kProfileKind);
  c.oversubscribed = run.cpu && run.cpu->cores > 0 && run.world_size > run.cpu->cores;
  c.peak_timing_dependent = p.contains(kPeakTimingDependent) && p.at(kPeakTimingDependent).is_boolean() &&
                            p.at(kPeakTimingDependent).get<bool>();
  if (p.contains(kPredictionNotes) && p.at(kPredictionNotes).is_array()) {
    for (const json& n : p.at(kPredictionNotes))
      if (n.is_string()) c.notes.push_back(n.get<std::string>());
  }

  if (auto step = opt_number(p, schema::kStepMs, source, "prediction."); step && run.step_ms_median > 0) {
    c.step_ms = PredictedMeasured{*step, run.step_ms_median};
    StepParts predicted;
    predicted.compute_ms = opt_number(p, kComputeMs, source, "prediction.").value_or(predicted.compute_ms);
    predicted.optimizer_ms = opt_number(p, kOptimizerMs, source, "prediction.").value_or(predicted.optimizer_ms);
    if (p.contains(schema::kComm)) {
      const json& comm = p.at(schema::kComm);
      predicted.exposed_comm_ms =
          opt_number(comm, kExposedMs, source, "prediction.comm.").value_or(std::numeric_limits<double>::quiet_NaN());
      predicted.compute_slowed_ms = opt_number(comm, kOverlapLostInNodeMs, source, "prediction.comm.").value_or(0.0);
      predicted.exposed_comm_ms -= predicted.compute_slowed_ms;
    }
    c.predicted_parts = predicted;
    c.measured_parts = measured_step_parts(raw, source);
  }

  const json empty = json::object();
  const json& predicted = p.contains(kMemoryBytes) && p.at(kMemoryBytes).is_object() ? p.at(kMemoryBytes) : empty;
  const json* measured = measured_memory(raw, c.rank);
  if (measured == nullptr) return c;
  const std::string ppath = "prediction.memory_bytes.";
  const std::string mpath = "memory.";
  for (const char* category : kMemoryCategories) {
    const std::string name = category;
    std::optional<double> pred = opt_number(predicted, name, source, ppath);
    std::optional<double> meas;
    if (name == kPeak) {
      // The device side where both sides have it (what memory.limit caps, as a GPU's memory: offload's host buffers
      // and an async save's snapshot are host memory); else the whole counted peak (runs recorded before the split).
      const std::optional<double> device_pred = opt_number(predicted, kDevicePeak, source, ppath);
      const std::optional<double> device_meas = opt_number(*measured, schema::kDeviceSidePeakBytes, source, mpath);
      if (device_pred && device_meas) {
        pred = device_pred;
        meas = device_meas;
      } else {
        meas = opt_number(*measured, schema::kTensorPeakBytes, source, mpath);
      }
    } else {
      meas = opt_number(*measured, name + "_bytes", source, mpath);
    }
    // The measured activations are the peak minus the kept state, so the logits live at the peak are in them.
    if (name == "activations" && pred) *pred += opt_number(predicted, kLogits, source, ppath).value_or(0.0);
    if (pred && meas) c.memory_bytes[name] = PredictedMeasured{*pred, *meas};
  }
  return c;
}

std::vector<RunComparison> compare_scenario(const Scenario& scenario) {
  std::vector<RunComparison> out;
  for (const RunResult& r : scenario.runs)
    if (auto c = compare_run(r, scenario.name)) out.push_back(std::move(*c));
  return out;
}

AccuracySummary evaluate_accuracy(const std::vector<Scenario>& scenarios, const std::string& study) {
  AccuracySummary s;
  std::map<std::string, std::vector<RunComparison>> by_scenario;
  for (const Scenario& sc : scenarios) {
    for (const RunResult& r : sc.runs) {
      if (auto c = compare_run(r, sc.name)) {
        by_scenario[sc.name].push_back(*c);
        s.runs.push_back(std::move(*c));
      } else {
        s.without_prediction.push_back(sc.name + "/" + r.name);
      }
    }
  }
  auto timed = [](const std::vector<RunComparison>& runs) {
    return std::any_of(runs.begin(), runs.end(), [](const RunComparison& c) { return c.step_ms.has_value(); });
  };
  std::vector<const std::vector<RunComparison>*> study_groups;
  if (by_scenario.count(study) && timed(by_scenario.at(study))) {
    s.study = study;
    study_groups.push_back(&by_scenario.at(study));
  } else {
    s.study = "all";
    for (const auto& [name, runs] : by_scenario) study_groups.push_back(&runs);
  }
  for (const auto* runs : study_groups) {
    std::vector<const RunComparison*> with_time;
    for (const RunComparison& c : *runs) {
      if (!c.step_ms || c.oversubscribed) continue;
      with_time.push_back(&c);
      s.study_step_errors_pct.push_back(c.step_ms->error_pct());
    }
    for (std::size_t i = 0; i < with_time.size(); ++i) {
      for (std::size_t j = i + 1; j < with_time.size(); ++j) {
        if (with_time[i]->strategy == with_time[j]->strategy) continue;  // the target ranks strategies
        const PredictedMeasured& a = *with_time[i]->step_ms;
        const PredictedMeasured& b = *with_time[j]->step_ms;
        RankedPair pair{with_time[i]->run, with_time[j]->run, a.predicted, b.predicted, a.measured, b.measured};
        const auto sign = [](double x) { return (x > 0) - (x < 0); };
        pair.right = sign(a.predicted - b.predicted) == sign(a.measured - b.measured);
        const double smaller = std::min(a.measured, b.measured);
        pair.within_noise = smaller > 0 && std::abs(a.measured - b.measured) / smaller * 100.0 < kRankingNoisePct;
        s.pairs.push_back(pair);
      }
    }
  }
  for (const Scenario& sc : scenarios) {
    for (const auto& [name, points] : crossover_series(sc)) {
      const SeriesCrossings crossings = series_crossings(points);
      CrossoverCheck check{sc.name,
                           name,
                           crossings.measured,
                           crossings.predicted,
                           points.back(),
                           /*oversubscribed=*/false,
                           crossings.measured_range};
      for (const RunResult& r : sc.runs)
        if (r.name.rfind(name + "@", 0) == 0 && r.cpu && r.cpu->cores > 0 && r.world_size > r.cpu->cores)
          check.oversubscribed = true;
      s.crossovers.push_back(check);
    }
  }
  if (!s.study_step_errors_pct.empty()) {
    std::vector<double> abs_errors;
    for (double e : s.study_step_errors_pct) abs_errors.push_back(std::abs(e));
    s.median_abs_step_error_pct = median(abs_errors);
  }
  return s;
}

}  // namespace dtlab::analysis
