// calibrate_overlap.hpp: step 6 of `dtlab calibrate` (calibrate.hpp) — the comm model's overlap_hidden fitted to a
// short training run on a CPU host.
//
// comm-bench's overlap line times one 4 MiB all_reduce beside cache-resident GEMMs. A training step's overlapped
// gathers and reduce-scatters cost a CPU rank more than that: Gloo's threads copy and reduce on the cores the
// forward and backward hold, and take their memory bandwidth and caches besides. So the comm model's overlap_hidden
// is fitted to a short training run of the calibrated config instead, under the strategy of this build whose
// schedule overlaps the most communication there (by the step model): the step model's forward+backward and exposed
// communication without the overlapped calls (`base`) against the run's measured forward+backward + comm_wait
// medians; what is left, over the time the schedule overlapped, is the share not hidden (clamped to [-1, 1]).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/cost/profile.hpp"
#include "lab/tools/calibrate.hpp"

namespace dtlab {

struct OverlapFit {
  std::string strategy;      // the strategy trained
  double unclamped = 0;      // 1 - (measured - base) / overlapped
  double hidden = 0;         // the same, clamped to [-1, 1]
  double measured_ms = 0;    // forward + backward + comm_wait, phase medians of the run
  double base_ms = 0;        // predicted compute + exposed communication, overlapped calls left out
  double overlapped_ms = 0;  // what the strategy's schedule overlaps with compute
  std::string command;
};

// Picks the strategy, trains it (`dtlab launch -n ranks dtlab train`, in a scratch directory removed afterwards) and
// solves for the figure. `profile` is the one being written, its compute and comm figures already measured. Throws
// std::runtime_error naming the command and its output directory when the run fails, or when no strategy of this
// build overlaps anything at the config.
OverlapFit fit_overlap_in_training(const CalibrateOptions& options, const analysis::MachineProfile& profile);

// Puts the fit into `profile` (comm.intra_node.overlap_hidden, and the note that names the run in place of the
// comm-bench line's), prints it, and returns calibration.json's `overlap_fit` record.
nlohmann::json apply_overlap_fit(const OverlapFit& fit, int ranks, analysis::MachineProfile& profile);

}  // namespace dtlab
