// calibrate_overlap.cpp: overlap_hidden fitted to a training run (see calibrate_overlap.hpp).
#include "lab/tools/calibrate_overlap.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/cost/step_model.hpp"
#include "lab/atomic_file.hpp"
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

OverlapFit fit_overlap_in_training(const CalibrateOptions& options, const analysis::MachineProfile& profile) {
  analysis::MachineProfile nothing_hidden = profile;
  nothing_hidden.comm.intra_node.overlap_hidden = 0.0;  // so overlap_lost_ms is all of the overlapped time
  std::vector<std::string> base_overrides = calibration_overrides(options);
  base_overrides.push_back("train.steps=" + std::to_string(options.quick ? 4 : 12));
  base_overrides.push_back("instrument.warmup_steps=2");
  base_overrides.push_back("instrument.profile=");  // this profile is the one being written
  base_overrides.push_back("checkpoint.dir=");      // a config's checkpoints are not this run's to write
  base_overrides.push_back("memory.limit=none");    // nor its cap: the run measures time

  OverlapFit fit;
  std::vector<std::string> overrides;
  std::optional<Config> run;
  analysis::StepPrediction predicted;
  for (const std::string& id : strategy_ids()) {
    std::vector<std::string> with = base_overrides;
    with.push_back("parallel.strategy=" + id);
    try {
      Config candidate = load_config(options.config_path, with, options.ranks);
      const analysis::StepPrediction s = analysis::predict_step(candidate, cost_plan(candidate, 0), nothing_hidden);
      if (s.overlap_lost_ms > predicted.overlap_lost_ms) {
        fit.strategy = id;
        overrides = with;
        run = std::move(candidate);
        predicted = s;
      }
    } catch (const std::exception&) {
      continue;  // a strategy this config does not validate for (hybrid without a shard size, say): not a candidate
    }
  }
  if (!run)
    throw std::runtime_error(
        "calibrate: no strategy of this build overlaps communication with compute at this "
        "config: overlap_hidden cannot be fitted to a training run");

  const fs::path scratch = fs::temp_directory_path() / ("dtlab-calibrate-overlap-" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  std::string config_path = options.config_path;
  if (config_path.empty()) {  // `dtlab train` takes a file; the overrides carry the shape
    config_path = (scratch / "config.yaml").string();
    write_file_atomic(config_path, "model:\n  preset: small\n");
  }
  std::vector<std::string> args = {self_exe(), "launch", "-n",       std::to_string(options.ranks),
                                   self_exe(), "train",  "--config", config_path};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), {"--out", (scratch / "run").string()});
  fit.command = join(args);
  std::printf("calibrate: %s\n", fit.command.c_str());
  std::fflush(stdout);
  const int status = run_child(args);
  if (status != 0) {
    throw std::runtime_error("calibrate: the overlap run `" + fit.command + "` exited with status " +
                             std::to_string(status) + " (its output is in " + scratch.string() + ")");
  }
  const json result =
      read_json_file((scratch / "run" / "result.json").string(), "the overlap run exited 0 but wrote no");
  const json& phases = result.at("summary").at("phases_ms");
  const auto median_of = [&](const char* phase) { return phases.at(phase).at("median").get<double>(); };
  fit.measured_ms = median_of("forward") + median_of("backward") + median_of("comm_wait");

  fit.overlapped_ms = predicted.overlap_lost_ms;
  fit.base_ms = predicted.compute_ms + predicted.exposed_comm_ms - predicted.overlap_lost_ms;
  fit.unclamped = 1.0 - (fit.measured_ms - fit.base_ms) / fit.overlapped_ms;
  fit.hidden = std::clamp(fit.unclamped, -1.0, 1.0);
  fs::remove_all(scratch);
  return fit;
}

json apply_overlap_fit(const OverlapFit& fit, int ranks, analysis::MachineProfile& profile) {
  char note[400];
  std::snprintf(note, sizeof note,
                "comm.intra_node.overlap_hidden: fitted to a %d-rank %s run of this config (calibrate.hpp step 6): "
                "forward+backward+comm_wait measured %.1f ms against %.1f ms predicted without the %.1f ms the "
                "schedule overlaps (%.2f before the clamp to [-1, 1]); comm-bench's overlap line (%.2f) stays in "
                "comm_bench.json",
                ranks, fit.strategy.c_str(), fit.measured_ms, fit.base_ms, fit.overlapped_ms, fit.unclamped,
                profile.comm.intra_node.overlap_hidden.value_or(1.0));
  for (std::string& n : profile.notes)
    if (n.rfind("comm.*.overlap_hidden", 0) == 0) n = note;
  profile.comm.intra_node.overlap_hidden = fit.hidden;
  std::printf(
      "calibrate: overlap under training (%s): measured %.1f ms, %.1f ms predicted without the %.1f ms "
      "overlapped -> overlap_hidden %.2f\n",
      fit.strategy.c_str(), fit.measured_ms, fit.base_ms, fit.overlapped_ms, fit.hidden);
  return {
      {"command", fit.command},      {"strategy", fit.strategy},           {"measured_ms", fit.measured_ms},
      {"base_ms", fit.base_ms},      {"overlapped_ms", fit.overlapped_ms}, {"overlap_hidden_unclamped", fit.unclamped},
      {"overlap_hidden", fit.hidden}};
}

}  // namespace dtlab
