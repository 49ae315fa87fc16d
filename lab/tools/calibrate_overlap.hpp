// calibrate_overlap.hpp: step 6 of `dtlab calibrate` (calibrate.hpp) — the comm model's overlap_hidden fitted to
// short training runs on a CPU host.
//
// comm-bench's overlap line times one 4 MiB all_reduce beside cache-resident GEMMs. A training step's overlapped
// gathers and reduce-scatters cost a CPU rank more than that: Gloo's threads copy and reduce on the cores the
// forward and backward hold, and take their memory bandwidth and caches besides. So the comm model's overlap_hidden
// is fitted to training runs of the calibrated config instead, in pairs run back to back:
//   - the strategy of this build whose schedule overlaps the most communication there (by the step model), and
//   - a reference that overlaps the least (DDP with the whole model in one bucket: its all-reduce starts when
//     backward ends).
// Each pair's measured difference (forward+backward+comm_wait medians) against the step model's difference gives
// the share of the overlapped time not hidden. The pair shares the machine's state of the moment, so a compute rate
// that drifted since steps 1-3 cancels. (Fitting one run against the predicted compute gave 0.26 and 0.79 in two
// calibrations of one machine whose overlap runs measured within 3 ms of each other: docs/performance.md.)
// The figure is the median over the pairs, clamped to [-1, 1].
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/cost/profile.hpp"
#include "lab/tools/calibrate.hpp"

namespace dtlab {

// One of the two runs of a pair: what the step model says of it (with nothing hidden) and the command.
struct OverlapRunPlan {
  std::string strategy;                // parallel.strategy of the run
  std::vector<std::string> overrides;  // every override the run is launched with
  double base_ms = 0;                  // predicted compute + exposed communication, overlapped calls left out
  double compute_ms = 0;               // of which compute (forward + backward)
  double overlapped_ms = 0;            // what the schedule overlaps with compute
};

// A run's phase medians (ms) of the timed steps.
struct OverlapRunPhases {
  double forward = 0, backward = 0, comm_wait = 0;
  double sum() const { return forward + backward + comm_wait; }
};

// One pair's measurements (phase medians of each run; the fit uses their sums) and the figure it gives.
struct OverlapPair {
  OverlapRunPhases overlapping, reference;
  double unclamped = 0;  // 1 - ((overlapping - reference) - (base difference)) / (overlapped difference)
};

struct OverlapFit {
  OverlapRunPlan overlapping, reference;
  std::vector<OverlapPair> pairs;
  double unclamped = 0;  // the median of the pairs' figures
  double hidden = 0;     // the same, clamped to [-1, 1]
  std::string command;   // the overlapping run's command (the reference's differs in its strategy overrides)
  std::string reference_command;
};

// The figure a pair gives: the share of the overlapped time that compute hid, so that the step model's difference
// between the two runs equals the measured one. Throws std::invalid_argument when the two runs overlap the same.
double overlap_hidden_of_pair(const OverlapRunPlan& overlapping, const OverlapRunPlan& reference, double overlapping_ms,
                              double reference_ms);

// Picks the two strategies, trains them in turn (`dtlab launch -n ranks dtlab train`, 3 pairs, 1 with --quick, in
// a scratch directory removed afterwards) and solves for the figure. `profile` is the one being written, its
// compute and comm figures already measured. Throws std::runtime_error naming the command and its output
// directory when a run fails, or when no two strategies of this build differ in what they overlap at the config.
OverlapFit fit_overlap_in_training(const CalibrateOptions& options, const analysis::MachineProfile& profile);

// Puts the fit into `profile` (comm.intra_node.overlap_hidden, and the note that names the runs in place of the
// comm-bench line's), prints it, and returns calibration.json's `overlap_fit` record.
nlohmann::json apply_overlap_fit(const OverlapFit& fit, int ranks, analysis::MachineProfile& profile);

}  // namespace dtlab
