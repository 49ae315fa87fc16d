// comm_model.hpp: the communication cost model — α (latency per message), β (time per byte moved) and
// γ (time per byte reduced) per op and per algorithm the backend really runs (torch-free).
//
//   CommModel m = fit_comm_model(comm_bench_json);                        // analysis/cost/fit.hpp
//   double t = collective_time_us(m, "reduce_scatter", "backend", 64 << 20, 8);
//   nlohmann::json j = m.to_json();   // {"backend":"gloo","ops":{"all_reduce/backend":{"alpha_us":..,...}}}
//
// Formulas (Hockney α-β-γ; Thakur, Rabenseifner, Gropp 2005; see docs/cost-models.md "Formulas"). S = bytes in
// lab/comm's convention (the full buffer for all_reduce / broadcast, the gathered size for all_gather /
// reduce_scatter), p = group size, each key's own α, β, γ:
//   all_reduce/backend       Gloo's ring all-reduce:            2(p-1)α + 2(p-1)/p·Sβ + (p-1)/p·Sγ
//   all_reduce/ring          lab ring reduce-scatter + ring all-gather: the same shape
//   reduce_scatter/ring      lab ring:                           (p-1)α + (p-1)/p·S(β+γ)
//   reduce_scatter/backend   Gloo: a full all-reduce, then this rank's chunk copied out (pytorch PR #118911),
//                            so the all-reduce shape above: twice the bytes of the ring
//   all_gather/ring|backend  ring (Gloo's all-gather is a ring too): (p-1)α + (p-1)/p·Sβ
//   broadcast/backend        Gloo's binomial tree:               ⌈log2 p⌉·(α + Sβ)
//   send_recv/backend        one exchange, both directions at once: α + Sβ
// At p = 1 every collective costs 0 (lab/comm copies locally, no message is sent).
//
// Size regimes: a key may carry a second set of α, β, γ for calls of at least `large_from_bytes` (S as above).
// On a CPU over loopback TCP, messages that outgrow the caches and the socket buffers cost ~3x more per byte than
// small ones (measured here: all_gather/ring at 1 MiB 7.8 GB/s algbw, from 4 MiB on 1.5-3.4 GB/s), so no single
// line fits 1 KiB..256 MiB — as MPI models switch from the eager to the rendezvous protocol. The switch is a size
// of the whole call; at another group size the per-step chunk S/p differs, and extrapolation keeps the fitted
// switch as it is (a stated simplification).
// The fitted coefficients absorb what the shapes leave out (Gloo's 1 MiB segments, the chunk copy of the
// emulated reduce-scatter, the clone in the lab's ring): they are exact at the fitted world size and
// extrapolate to others through the shapes above.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace dtlab::analysis {

struct CollectiveCost {
  double alpha_us = 0, beta_us_per_byte = 0, gamma_us_per_byte = 0;
  // Optional large-message regime (see above): 0 = none; else calls of >= large_from_bytes use the large_* figures.
  int64_t large_from_bytes = 0;
  double large_alpha_us = 0, large_beta_us_per_byte = 0, large_gamma_us_per_byte = 0;
};

struct CommModel {
  std::string backend;                        // "gloo", "nccl"
  std::map<std::string, CollectiveCost> ops;  // key "<op>/<algorithm>": "all_reduce/backend", "reduce_scatter/ring"
  // Optional, in [-1, 1]: the fraction of a collective's time that compute running at once hides (comm-bench's
  // overlap line, lab/tools/comm_bench.hpp). Absent = 1, the schedules' assumption that an overlapped collective costs
  // the rank nothing (a GPU's collectives run on their own engines). On CPU ranks that hold every core, the backend's
  // threads copy and reduce on the cores the compute needs, and little is hidden (step_model.hpp); below 0, running
  // the two at once costs more than taking turns (they also contend for caches and memory bandwidth).
  std::optional<double> overlap_hidden;
  // The call overlap_hidden was measured at: an all_reduce/backend of overlap_bytes over overlap_ranks ranks.
  // Profiles written before these were recorded measured 4 MiB over 2 ranks (the line's call then).
  int64_t overlap_bytes = kOverlapLineBytes;
  int overlap_ranks = 2;
  static constexpr int64_t kOverlapLineBytes = int64_t{4} << 20;

  // {"backend":..., "ops": {"all_reduce/backend": {"alpha_us":.., "beta_us_per_byte":.., "gamma_us_per_byte":..,
  //   "large": {"from_bytes":.., "alpha_us":.., "beta_us_per_byte":.., "gamma_us_per_byte":..}}},
  //   "overlap_hidden": 0.1, "overlap_bytes": 4194304, "overlap_ranks": 2}  ("large" and the overlap keys: optional;
  //   overlap_bytes and overlap_ranks only beside overlap_hidden)
  nlohmann::json to_json() const;
  // Throws std::invalid_argument naming `source` and the key ("profile.json: ops.all_reduce/backend.alpha_us:
  // missing"). Coefficients must be finite and >= 0.
  static CommModel from_json(const nlohmann::json& j, const std::string& source);
};

// Time of one collective call (bytes in lab/comm's convention) with the algorithm the backend really runs
// (formulas above). op: all_reduce | all_gather | reduce_scatter | broadcast | send_recv; algorithm: backend |
// ring. REQUIRES: bytes >= 0, group_size >= 1. Throws std::invalid_argument naming the op and algorithm when
// the model has no such key or the pair is not a known collective (e.g. "broadcast/ring").
// link_sharing >= 1: how many such calls cross the same link at once (each gets 1/link_sharing of its rate), which
// multiplies the β term only (step_model.hpp: concurrent cross-node groups on one node's link).
double collective_time_us(const CommModel& m, const std::string& op, const std::string& algorithm, int64_t bytes,
                          int group_size, double link_sharing = 1.0);

// Multipliers of α, β and γ in collective_time_us for one call: time = a·α + b·β + c·γ. The fit uses them,
// so model and fit can never disagree on a shape. Throws like collective_time_us for an unknown pair.
struct CostShape {
  double alpha = 0, beta = 0, gamma = 0;
};
CostShape cost_shape(const std::string& op, const std::string& algorithm, int64_t bytes, int group_size);

// The model of a document that is either a CommModel JSON ({"backend","ops"}) or a machine profile that holds
// one under "comm"/"intra_node" (analysis/cost/profile.hpp). Throws std::invalid_argument naming `source`.
CommModel comm_model_from_document(const nlohmann::json& doc, const std::string& source);

}  // namespace dtlab::analysis
