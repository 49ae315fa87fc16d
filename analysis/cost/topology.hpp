// topology.hpp: a machine profile moved onto another cluster layout — nodes × ranks per node and the link rates
// between and inside them (torch-free).
//
//   Topology t{.nodes = 2, .ranks_per_node = 2, .inter_link_bps = 200e6};
//   MachineProfile on_links = on_topology(load_profile("results/calibration/profile.json"), t);
//   predict(config, &on_links);          // collectives that span nodes use the 200 Mbit/s inter_node model
//
// What changes (α and γ never do: they are per message and per reduced byte, not per link):
//   ranks_per_node   the topology's; groups span nodes by it (step_model.hpp)
//   inter_node β     the profile measured inter_node at inter_link_bps R₀: β scales with the rate, β·R₀/R, but never
//                    below the same op's intra-node β (a fast enough link leaves the CPU's per-byte work, which the
//                    intra-node figure measures) nor below the wire time 8/R (no fit, however noisy, sends faster
//                    than the link). Without a recorded R₀ (spec sheets) β becomes the wire time 8/R.
//                    Without an inter_node model at all (a loopback calibration) inter_node is derived from
//                    intra_node with β = max(β_intra, 8/R). Its overlap_hidden (when the intra one has it) is
//                    1 − (1 − η_intra)·t_intra/t_inter of a 4 MiB all_reduce at p = 2: the cores are busy for the
//                    intra-node part of the call, and compute can fill the rest, which is waiting on the link.
//   intra_node β     with intra_link_bps: max(β, 8/R_intra) (loopback shaped like the emulated cluster's --intra-link)
//   ranks_per_link   the topology's when given; else the profile's when it has an inter_node model; else the node's
//                    ranks (the emulated cluster: one link per node, shared by its ranks)
// Every change is listed in the profile's `adjustments`, which predict() adds to its notes.
#pragma once

#include "analysis/cost/profile.hpp"

namespace dtlab::analysis {

struct Topology {
  int nodes = 1;
  int ranks_per_node = 0;     // 0 = the profile's
  double inter_link_bps = 0;  // 0 = the profile's inter_node model as it is
  double intra_link_bps = 0;  // 0 = the profile's intra_node model as it is
  int ranks_per_link = 0;     // 0 = as described above
};

// REQUIRES: rates >= 0, counts >= 0. Throws std::invalid_argument naming the field otherwise.
MachineProfile on_topology(const MachineProfile& profile, const Topology& topology);

// Wire time of one byte at `bits_per_s`, in µs (the unit of β).
inline double wire_us_per_byte(double bits_per_s) { return 8.0 / bits_per_s * 1e6; }

// Raises every β of `model` (both size regimes) below `floor_us_per_byte` to it; returns how many it raised. A fit
// of few sizes on a busy machine can find a slope near 0 (the per-call term took the time): on a link of known rate
// the wire time is the least a byte costs. A reducing op's γ gives back what its β gains (down to 0), so its fitted
// slope is kept where it can be.
int floor_betas(CommModel& model, double floor_us_per_byte);

}  // namespace dtlab::analysis
