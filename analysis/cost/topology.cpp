// topology.cpp: on_topology (see topology.hpp).
#include "analysis/cost/topology.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

#include "lab/link_rate.hpp"

namespace dtlab::analysis {
namespace {

// Applies `beta_of(key, β, large)` to both regimes of every op of `model`.
void map_betas(CommModel& model, const std::function<double(const std::string&, double, bool)>& beta_of) {
  for (auto& [key, cost] : model.ops) {
    cost.beta_us_per_byte = beta_of(key, cost.beta_us_per_byte, false);
    if (cost.large_from_bytes > 0) cost.large_beta_us_per_byte = beta_of(key, cost.large_beta_us_per_byte, true);
  }
}

// The same op's intra-node β in the same regime (0 when the intra model lacks the op).
double intra_beta(const CommModel& intra, const std::string& key, bool large) {
  const auto it = intra.ops.find(key);
  if (it == intra.ops.end()) return 0;
  return large && it->second.large_from_bytes > 0 ? it->second.large_beta_us_per_byte : it->second.beta_us_per_byte;
}

std::string fixed2(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

}  // namespace

int floor_betas(CommModel& model, double floor_us_per_byte) {
  int raised = 0;
  for (auto& [key, cost] : model.ops) {
    const auto slash = key.find('/');
    const CostShape unit = cost_shape(key.substr(0, slash), key.substr(slash + 1), 1, 2);  // b/c is the same at any p
    // Raising β adds unit.beta·Δβ to each byte's time. A reducing op's γ took the rest of its fitted slope above
    // the all-gather's β (fit.hpp), so it gives that back: the slope measured at this rate stays what it was, and
    // only the share that scales with the link grows. Raising β alone made a 16 MiB all-reduce across a 1 Gbit/s
    // link 1.5x its measured time, and kept that excess as γ (reduction time) at every faster rate.
    const auto raise = [&](double& beta, double& gamma) {
      if (beta >= floor_us_per_byte) return;
      ++raised;
      if (unit.gamma > 0) gamma = std::max(0.0, gamma - unit.beta * (floor_us_per_byte - beta) / unit.gamma);
      beta = floor_us_per_byte;
    };
    raise(cost.beta_us_per_byte, cost.gamma_us_per_byte);
    if (cost.large_from_bytes > 0) raise(cost.large_beta_us_per_byte, cost.large_gamma_us_per_byte);
  }
  return raised;
}

MachineProfile on_topology(const MachineProfile& profile, const Topology& t) {
  if (t.nodes < 1 || t.ranks_per_node < 0 || t.ranks_per_link < 0)
    throw std::invalid_argument("topology: nodes must be >= 1 and ranks_per_node, ranks_per_link >= 0");
  if (!(t.inter_link_bps >= 0) || !(t.intra_link_bps >= 0) || !std::isfinite(t.inter_link_bps) ||
      !std::isfinite(t.intra_link_bps))
    throw std::invalid_argument("topology: link rates must be finite and >= 0 bit/s");
  MachineProfile p = profile;
  CommProfile& comm = p.comm;
  const bool had_inter_model = comm.inter_node.has_value();
  if (t.ranks_per_node > 0) comm.ranks_per_node = t.ranks_per_node;

  if (t.intra_link_bps > 0) {
    const double wire = wire_us_per_byte(t.intra_link_bps);
    map_betas(comm.intra_node, [&](const std::string&, double beta, bool) { return std::max(beta, wire); });
    comm.intra_link_bps = t.intra_link_bps;
    p.adjustments.push_back("intra-node links at " + describe_rate(t.intra_link_bps) +
                            ": β = max(measured, wire time)");
  }

  if (t.inter_link_bps > 0) {
    const double wire = wire_us_per_byte(t.inter_link_bps);
    const CommModel& intra = comm.intra_node;
    if (!had_inter_model) {
      CommModel inter = intra;
      map_betas(inter, [&](const std::string&, double beta, bool) { return std::max(beta, wire); });
      if (intra.overlap_hidden && intra.ops.count("all_reduce/backend") > 0) {
        // A derived cross-node call keeps the cores busy only as long as the intra-node call would; the rest of it
        // is waiting on the link, which compute can fill. Taken at the call the fraction was measured at.
        const double busy =
            collective_time_us(intra, "all_reduce", "backend", intra.overlap_bytes, intra.overlap_ranks);
        const double whole =
            collective_time_us(inter, "all_reduce", "backend", intra.overlap_bytes, intra.overlap_ranks);
        if (whole > 0) inter.overlap_hidden = 1.0 - (1.0 - *intra.overlap_hidden) * std::min(1.0, busy / whole);
      }
      comm.inter_node = inter;
      p.adjustments.push_back("inter_node derived from intra_node: β = max(intra-node β, wire time at " +
                              describe_rate(t.inter_link_bps) + ")" +
                              (inter.overlap_hidden ? ", overlap_hidden " + fixed2(*inter.overlap_hidden) +
                                                          " (the cores are busy for the intra-node part of a call)"
                                                    : std::string()));
    } else if (comm.inter_link_bps > 0) {
      const double scale = comm.inter_link_bps / t.inter_link_bps;
      map_betas(*comm.inter_node, [&](const std::string& key, double beta, bool large) {
        return std::max({beta * scale, intra_beta(intra, key, large), wire});
      });
      p.adjustments.push_back("inter_node measured at " + describe_rate(comm.inter_link_bps) + ", scaled to " +
                              describe_rate(t.inter_link_bps) + " (β × " + std::to_string(scale) +
                              ", never below the intra-node β or the wire time)");
    } else {
      map_betas(*comm.inter_node, [&](const std::string&, double, bool) { return wire; });
      p.adjustments.push_back("inter_node β set to the wire time at " + describe_rate(t.inter_link_bps) +
                              " (the profile records no measured link rate)");
    }
    comm.inter_link_bps = t.inter_link_bps;
  }

  if (t.ranks_per_link > 0)
    comm.ranks_per_link = t.ranks_per_link;
  else if (!had_inter_model && comm.inter_node)
    comm.ranks_per_link = comm.ranks_per_node;  // the emulated cluster: one link per node
  if (t.nodes > 1 || t.ranks_per_node > 0)
    p.adjustments.push_back("topology " + std::to_string(t.nodes) + " node(s) x " +
                            std::to_string(comm.ranks_per_node) + " ranks, " + std::to_string(comm.ranks_per_link) +
                            " rank(s) per inter-node link");
  return p;
}

}  // namespace dtlab::analysis
