// calibrate_overlap.cpp: overlap_hidden fitted to pairs of training runs (see calibrate_overlap.hpp).
#include "lab/tools/calibrate_overlap.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/cost/step_model.hpp"
#include "lab/atomic_file.hpp"
#include "lab/stats.hpp"
#include "lab/tools/calibrate_children.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab {
namespace fs = std::filesystem;
using calibrate_children::calibration_overrides;
using calibrate_children::join;
using calibrate_children::read_json_file;
using calibrate_children::run_child;
using calibrate_children::self_exe;
using nlohmann::json;

namespace {

// A bucket larger than any model here: DDP then reduces the whole model in one all-reduce, issued when the last
// gradient is ready, i.e. after backward, and overlaps (nearly) nothing.
constexpr const char* kOneBucket = "parallel.bucket_cap_mb=1000000";

// Every strategy of this build the config validates for at `ranks` (the strategy's own refusals included), and DDP
// with one bucket, each with what the step model says it overlaps when nothing is hidden.
std::vector<OverlapRunPlan> candidate_runs(const CalibrateOptions& options, const analysis::MachineProfile& profile,
                                           const std::vector<std::string>& base_overrides) {
  analysis::MachineProfile nothing_hidden = profile;
  nothing_hidden.comm.intra_node.overlap_hidden = 0.0;  // so overlap_lost_ms is all of the overlapped time
  std::vector<std::vector<std::string>> variants;
  for (const std::string& id : strategy_ids()) variants.push_back({"parallel.strategy=" + id});
  variants.push_back({"parallel.strategy=ddp", kOneBucket});
  std::vector<OverlapRunPlan> runs;
  for (const std::vector<std::string>& variant : variants) {
    OverlapRunPlan run;
    run.overrides = base_overrides;
    run.overrides.insert(run.overrides.end(), variant.begin(), variant.end());
    try {
      const Config config = load_config(options.config_path, run.overrides, options.ranks);
      const StrategySpec& spec = strategy_spec(config.parallel.strategy);
      if (spec.check != nullptr) spec.check(config);  // single at 2 ranks, hybrid without a shard size, ...
      const analysis::StepPrediction s = analysis::predict_step(config, cost_plan(config, 0), nothing_hidden);
      run.strategy = config.parallel.strategy;
      run.overlapped_ms = s.overlap_lost_ms;
      run.base_ms = s.compute_ms + s.exposed_comm_ms - s.overlap_lost_ms;
      run.compute_ms = s.compute_ms;
    } catch (const std::exception&) {
      continue;  // a strategy this config does not validate for: not a candidate
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

// Trains one run into `out`; returns its forward, backward and comm_wait medians.
OverlapRunPhases train_and_measure(const CalibrateOptions& options, const std::string& config_path,
                                   const OverlapRunPlan& run, const fs::path& out, std::string& command) {
  std::vector<std::string> args = {self_exe(), "launch", "-n",       std::to_string(options.ranks),
                                   self_exe(), "train",  "--config", config_path};
  args.insert(args.end(), run.overrides.begin(), run.overrides.end());
  args.insert(args.end(), {"--out", out.string()});
  command = join(args);
  std::printf("calibrate: %s\n", command.c_str());
  std::fflush(stdout);
  const int status = run_child(args);
  if (status != 0) {
    throw std::runtime_error("calibrate: the overlap run `" + command + "` exited with status " +
                             std::to_string(status) + " (its output is in " + out.string() + ")");
  }
  const json result = read_json_file((out / "result.json").string(), "the overlap run exited 0 but wrote no");
  const json& phases = result.at("summary").at("phases_ms");
  const auto median_of = [&](const char* phase) { return phases.at(phase).at("median").get<double>(); };
  return {median_of("forward"), median_of("backward"), median_of("comm_wait")};
}

}  // namespace

double overlap_hidden_of_pair(const OverlapRunPlan& overlapping, const OverlapRunPlan& reference, double overlapping_ms,
                              double reference_ms) {
  // Predicted time of a run at figure h: base + (1 - h) * overlapped. Equal the two runs' predicted difference to
  // the measured one and solve for h.
  const double overlapped_difference = overlapping.overlapped_ms - reference.overlapped_ms;
  if (!(overlapped_difference > 0))
    throw std::invalid_argument("calibrate: the overlap runs " + overlapping.strategy + " and " + reference.strategy +
                                " overlap the same time; overlap_hidden cannot be fitted to their difference");
  const double left_over = (overlapping_ms - reference_ms) - (overlapping.base_ms - reference.base_ms);
  return 1.0 - left_over / overlapped_difference;
}

OverlapFit fit_overlap_in_training(const CalibrateOptions& options, const analysis::MachineProfile& profile) {
  std::vector<std::string> base_overrides = calibration_overrides(options);
  base_overrides.push_back("train.steps=" + std::to_string(options.quick ? 4 : 12));
  base_overrides.push_back("instrument.warmup_steps=2");
  base_overrides.push_back("instrument.profile=");  // this profile is the one being written
  base_overrides.push_back("checkpoint.dir=");      // a config's checkpoints are not this run's to write
  base_overrides.push_back("memory.limit=none");    // nor its cap: the run measures time

  const std::vector<OverlapRunPlan> candidates = candidate_runs(options, profile, base_overrides);
  OverlapFit fit;
  for (const OverlapRunPlan& run : candidates) {  // the first of equals wins, in catalogue order
    if (fit.overlapping.strategy.empty() || run.overlapped_ms > fit.overlapping.overlapped_ms) fit.overlapping = run;
    if (fit.reference.strategy.empty() || run.overlapped_ms < fit.reference.overlapped_ms) fit.reference = run;
  }
  if (candidates.empty() || !(fit.overlapping.overlapped_ms > fit.reference.overlapped_ms))
    throw std::runtime_error(
        "calibrate: no two strategies of this build differ in the communication they overlap with compute at this "
        "config: overlap_hidden cannot be fitted to training runs");

  const fs::path scratch = fs::temp_directory_path() / ("dtlab-calibrate-overlap-" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  std::string config_path = options.config_path;
  if (config_path.empty()) {  // `dtlab train` takes a file; the overrides carry the shape
    config_path = (scratch / "config.yaml").string();
    write_file_atomic(config_path, "model:\n  preset: small\n");
  }
  const int pairs = options.quick ? 1 : 3;
  std::vector<double> figures;
  for (int i = 0; i < pairs; ++i) {  // in turn, so the two runs of a pair share the machine's state of the moment
    const std::string n = std::to_string(i);
    OverlapPair pair;
    pair.reference =
        train_and_measure(options, config_path, fit.reference, scratch / ("reference_" + n), fit.reference_command);
    pair.overlapping =
        train_and_measure(options, config_path, fit.overlapping, scratch / ("overlapping_" + n), fit.command);
    pair.unclamped =
        overlap_hidden_of_pair(fit.overlapping, fit.reference, pair.overlapping.sum(), pair.reference.sum());
    figures.push_back(pair.unclamped);
    fit.pairs.push_back(pair);
  }
  fit.unclamped = median_or_zero(figures);
  fit.hidden = std::clamp(fit.unclamped, -1.0, 1.0);
  fs::remove_all(scratch);
  return fit;
}

json apply_overlap_fit(const OverlapFit& fit, int ranks, analysis::MachineProfile& profile) {
  std::string figures;
  for (const OverlapPair& pair : fit.pairs) {
    char one[32];
    std::snprintf(one, sizeof one, "%s%.2f", figures.empty() ? "" : ", ", pair.unclamped);
    figures += one;
  }
  char note[600];
  std::snprintf(note, sizeof note,
                "comm.intra_node.overlap_hidden: fitted to %zu pair(s) of %d-rank runs of this config, %s against "
                "%s (calibrate.hpp step 6): the measured difference of forward+backward+comm_wait against the "
                "predicted one, over the %.1f ms more that %s overlaps; the median of the pairs' figures (%s), "
                "clamped to [-1, 1]; comm-bench's overlap line (%.2f) stays in comm_bench.json",
                fit.pairs.size(), ranks, fit.overlapping.strategy.c_str(), fit.reference.strategy.c_str(),
                fit.overlapping.overlapped_ms - fit.reference.overlapped_ms, fit.overlapping.strategy.c_str(),
                figures.c_str(), profile.comm.intra_node.overlap_hidden.value_or(1.0));
  for (std::string& n : profile.notes)
    if (n.rfind("comm.*.overlap_hidden", 0) == 0) n = note;
  profile.comm.intra_node.overlap_hidden = fit.hidden;
  std::printf("calibrate: overlap under training (%s against %s, pairs: %s) -> overlap_hidden %.2f\n",
              fit.overlapping.strategy.c_str(), fit.reference.strategy.c_str(), figures.c_str(), fit.hidden);
  const auto run_record = [](const OverlapRunPlan& run, const std::string& command) {
    return json{{"strategy", run.strategy},
                {"command", command},
                {"base_ms", run.base_ms},
                {"compute_ms", run.compute_ms},
                {"overlapped_ms", run.overlapped_ms}};
  };
  const auto phases_record = [](const OverlapRunPhases& p) {
    return json{{"forward", p.forward}, {"backward", p.backward}, {"comm_wait", p.comm_wait}};
  };
  json pairs = json::array();
  for (const OverlapPair& pair : fit.pairs)
    pairs.push_back({{"overlapping_ms", pair.overlapping.sum()},
                     {"reference_ms", pair.reference.sum()},
                     {"overlapping_phases_ms", phases_record(pair.overlapping)},
                     {"reference_phases_ms", phases_record(pair.reference)},
                     {"overlap_hidden_unclamped", pair.unclamped}});
  return {{"overlapping", run_record(fit.overlapping, fit.command)},
          {"reference", run_record(fit.reference, fit.reference_command)},
          {"pairs", pairs},
          {"overlap_hidden_unclamped", fit.unclamped},
          {"overlap_hidden", fit.hidden}};
}

}  // namespace dtlab
