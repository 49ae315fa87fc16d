// accuracy.hpp: how close the cost models' predictions come to what was measured (torch-free).
//
// Usage:
//   std::vector<Scenario> scenarios = discover({"results"});
//   AccuracySummary s = evaluate_accuracy(scenarios);     // runs whose result.json carries "prediction"
//   bool all_met = print_accuracy(s, std::cout);          // one line per run and target, each met / missed
//
//   dtlab-report --accuracy results          (same as `dtlab report --accuracy results`)
//   dtlab-report --accuracy --enforce results   (exit status 3 unless every target is met: a gate for scripts)
//   dtlab report --accuracy --enforce-only state-bytes,peak-memory results-quick   (only those targets gate: CI)
//
// Targets (issue 13, on this machine after `dtlab calibrate`), over every study given:
//   params / grads / optimizer bytes exact, per run;
//   peak memory within 10%, per run (the device side);
//   step time within 10%: the median of |error| over the runs (per-run errors printed too); runs with more ranks
//     than cores (context.cpu.cores) are printed but not counted: the model gives each rank a core;
//   the ranking of strategies by step time right in >= 90% of the pairs (two runs of one scenario under different
//     strategies) whose measured times differ by more than 10%; closer pairs are run-to-run noise, listed when
//     wrong but not scored;
//   the crossover link rate (exposed communication falling to 10% of the step, analysis/crossover.hpp) predicted
//     within a factor 1.5 of the measured, for every series of a link-rate sweep where both cross inside the swept
//     range (not applicable when no study sweeps link rates).
// A missed step-time target is followed by the part of the step (compute, exposed communication, optimizer, the
// rest) where prediction and measurement differ most, over the runs that recorded phases.
// Per-collective time accuracy belongs to `dtlab comm-bench --model`.
//
// Error % = (predicted - measured) / measured * 100: positive means the model over-estimates.
// What is compared (prediction keys from analysis/cost/predict.hpp):
//   memory_bytes.{params,grads,optimizer,buffers}  vs memory.<category>_bytes of the rank predicted
//   memory_bytes.activations + logits              vs memory.activations_bytes (peak minus the rest, so the
//                                                     logits live at the peak are in it)
//   memory_bytes.device_peak                       vs memory.device_side_peak_bytes (the device side, which
//                                                     memory.limit caps; host memory is offload's buffers and an
//                                                     async save's snapshot), when both are recorded; else
//   memory_bytes.peak                              vs memory.tensor_peak_bytes
//   step_ms                                        vs summary.step_ms_median
// and, to say why a step time is off, its parts:
//   compute_ms | comm.exposed_ms | optimizer_ms    vs summary.phases_ms.{forward + backward | comm_wait |
//                                                     optimizer}.median (when the run recorded phases)
// A prediction value that is null (e.g. times without a machine profile) is left out, not counted as wrong.
#pragma once

#include <array>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/crossover.hpp"
#include "analysis/results.hpp"

namespace dtlab::analysis {

inline constexpr double kPeakMemoryTargetPct = 10.0;
inline constexpr double kStepTimeTargetPct = 10.0;
inline constexpr double kRankingTargetPct = 90.0;
// Two runs whose measured step times differ by less than this are within run-to-run noise: their pair is listed
// when ranked wrong but not scored.
inline constexpr double kRankingNoisePct = 10.0;
// The predicted crossover link rate must be within this factor of the measured one.
inline constexpr double kCrossoverFactorTarget = 1.5;

// The memory categories compared, in display order; the last, kPeak, is the one the peak target judges.
inline constexpr const char* kPeak = "peak";
inline constexpr std::array<const char*, 6> kMemoryCategories = {"params",  "grads",       "optimizer",
                                                                 "buffers", "activations", kPeak};

struct PredictedMeasured {
  double predicted = 0;
  double measured = 0;
  // (predicted - measured) / measured * 100; 0 when both are 0; +inf when only measured is 0.
  double error_pct() const;
  bool exact() const { return predicted == measured; }
};

// A step split the way both the step model and the trainer's phases split it (ms; NaN when not known).
// A prediction's comm.exposed_ms counts overlapped calls inside a node that slow the compute they share cores with
// (comm.overlap_lost_in_node_ms): no rank waits for that time, it lengthens forward and backward. The predicted parts
// move it from the wait to compute_slowed_ms, so that each part compares with the measured phase it shows up in.
struct StepParts {
  double compute_ms = std::numeric_limits<double>::quiet_NaN();  // forward + backward (recompute included)
  double compute_slowed_ms = 0;  // predicted only: forward + backward lengthened by the node's overlapped calls
  double exposed_comm_ms = std::numeric_limits<double>::quiet_NaN();  // waiting for collectives
  double optimizer_ms = std::numeric_limits<double>::quiet_NaN();
  double forward_backward_ms() const { return compute_ms + compute_slowed_ms; }
};

// One run's prediction next to its measurement.
struct RunComparison {
  std::string scenario;  // scenario id ("runs" for ad-hoc run dirs)
  std::string run;       // run display name
  std::string strategy;
  int world_size = 1;
  int rank = 0;              // the rank predicted (and compared)
  std::string label;         // prediction | projection (predict.hpp)
  std::string profile;       // machine profile name, "" when the prediction had none
  std::string profile_kind;  // measured | spec-sheet | ""
  std::optional<PredictedMeasured> step_ms;
  std::optional<StepParts> predicted_parts, measured_parts;  // with step_ms, when each side has them
  std::map<std::string, PredictedMeasured> memory_bytes;     // by kMemoryCategories name; absent when either side is
  std::vector<std::string> notes;                            // prediction.notes
  bool oversubscribed = false;  // more ranks than the machine's cores: not in the step-time median or ranking
  // prediction.peak_timing_dependent: the strategy's comm thread allocates while the main thread computes, so the
  // measured peak moves between identical runs (strategies/spec.hpp); printed, not judged by the peak target.
  bool peak_timing_dependent = false;
};

// The comparison for one run, or nullopt when its result.json has no "prediction" object.
// Throws AnalysisError naming the run dir and key when "prediction" is there but malformed.
std::optional<RunComparison> compare_run(const RunResult& run, const std::string& scenario);

// Every comparison of one scenario's runs, in run order (runs without a prediction skipped).
std::vector<RunComparison> compare_scenario(const Scenario& scenario);

// A pair of runs ordered by predicted and by measured step time.
struct RankedPair {
  std::string a, b;  // run names
  double predicted_a_ms = 0, predicted_b_ms = 0, measured_a_ms = 0, measured_b_ms = 0;
  bool right = false;         // same order (a predicted tie counts as right only for a measured tie)
  bool within_noise = false;  // measured times differ by less than kRankingNoisePct: not scored
};

// One series of a link-rate sweep: the rate where exposed communication falls to kCrossoverThresholdPct of the
// step, measured and predicted (analysis/crossover.hpp).
struct CrossoverCheck {
  std::string scenario, series;
  Crossing measured, predicted;
  CrossoverPoint fastest;       // the series' run at its fastest rate: what is left of exposed communication there
  bool oversubscribed = false;  // a run of the series had more ranks than the machine has cores
  // Where the measured crossing lies by the steps' spread (SeriesCrossings::measured_range); printed, not judged.
  std::optional<std::pair<Crossing, Crossing>> measured_range;
  // Both inside the swept range: predicted / measured rate. Nullopt otherwise (printed, not judged).
  std::optional<double> factor() const;
};

struct AccuracySummary {
  std::vector<RunComparison> runs;              // every run with a prediction, scenario by scenario
  std::vector<std::string> without_prediction;  // "scenario/run" of runs that carry none
  std::string study;                            // the scenario the step-time median and ranking use, or "all"
  std::vector<double> study_step_errors_pct;    // per run of the study with both times
  std::optional<double> median_abs_step_error_pct;
  std::vector<RankedPair> pairs;           // within each scenario of the study
  std::vector<CrossoverCheck> crossovers;  // every series of every link-rate sweep
};

// Runs the comparisons. `study` names the scenario the step-time median and ranking are over (default: "all", every
// scenario); when no scenario has that name (or it has no timed predictions) every scenario is used.
AccuracySummary evaluate_accuracy(const std::vector<Scenario>& scenarios, const std::string& study = "all");

// The targets by the names `--enforce-only` takes, in the order they are printed. state-bytes and peak-memory are
// deterministic (the same config gives the same bytes on any machine); the others are timings.
inline constexpr std::array<const char*, 5> kAccuracyTargets = {"state-bytes", "peak-memory", "step-time", "ranking",
                                                                "crossover"};
// Each judged target's verdict by kAccuracyTargets name: true met, false missed, nullopt not judged. crossover is
// absent when no study sweeps link rates (the target does not apply).
using AccuracyVerdicts = std::map<std::string, std::optional<bool>>;

// Prints the figures with a met / missed verdict per line and a closing tally; fills `verdicts` when given.
// Returns true when every target that could be judged was met (false also when there is nothing to judge).
bool print_accuracy(const AccuracySummary& summary, std::ostream& out, AccuracyVerdicts* verdicts = nullptr);

// Exit status of run_accuracy when `enforce` is set and not every target was met.
inline constexpr int kAccuracyTargetsNotMet = 3;

// The `--accuracy` command: discover(inputs), evaluate, print to out. Returns 1 when inputs could not be loaded
// or no run has a prediction. Otherwise, without `enforce`, 0 (met or not: the figures are the product); with
// `enforce`, 0 only when print_accuracy() says every target was met, else kAccuracyTargetsNotMet, with a line
// on `log` saying so (a target that could not be judged is not met: an enforced gate never passes on no data).
// `enforce_only` (kAccuracyTargets names; implies enforce) narrows the gate to those targets: each must be judged
// and met; the others are printed and not enforced. An unknown name returns 2, naming it and the known ones.
int run_accuracy(const std::vector<std::string>& inputs, std::ostream& out, std::ostream& log, bool enforce = false,
                 const std::vector<std::string>& enforce_only = {});

}  // namespace dtlab::analysis
