// compute_model.hpp: FLOPs of a training step and the time they take at a profile's calibrated rate
// (torch-free).
//
//   ComputeFlops f = compute_flops(config);            // model: 6N + 12·L·h·s per token; executed: + recompute
//   ComputeTime t = compute_time(config, profile);     // per rank, per optimizer step
//
// Forward FLOPs per token (one third of training FLOPs): a block 2·(its matmul parameters) + 4·h·s
// (attention scores and weighted sum, PaLM appendix B counting, no causal discount); the head 2·V·h;
// the embedding 0 (a gather). Backward is twice the forward. Recompute adds one forward of every
// checkpointed block (full) or of every block's attention half (selective).
// Time = tokens per rank per step × executed FLOPs per token / (matmul_tflops[param_dtype] ×
// train_efficiency × thread factor). The thread factor (CPU profiles that record `threads`) scales the rate
// linearly with the threads a rank gets: train.threads, else cores / ranks on the machine (Config::host_ranks when
// known, else the node's ranks), and never more cores than the machine has. The measured side counts the same way:
// a profile that records the `ranks` that shared its `cores` during calibration (more threads than cores: an emulated
// cluster's ranks on one machine) measured min(threads, cores / ranks) effective threads, so a job of as many ranks
// gets factor 1, not the oversubscription a second time. GPU profiles have no thread fields: factor 1.
// Plus a fixed time per micro-step (profiles with gemm_overhead_us): the overhead per linear layer × the model's
// linear layers (7 per block + the head) × executed / model FLOPs (recomputed layers pay it again), one third in the
// forward and two thirds in the backward. It is what makes 4 micro-batches of 1 slower than 1 of 4 at the same
// FLOPs; it does not scale with threads.
#pragma once

#include <string>
#include <vector>

#include "analysis/cost/profile.hpp"
#include "lab/config.hpp"

namespace dtlab::analysis {

struct ComputeFlops {
  double model_per_token = 0;      // 6N + 12·L·h·s (lab/model_shape.hpp model_counts; what MFU counts)
  double recompute_per_token = 0;  // extra forward work of activation checkpointing
  double executed_per_token = 0;   // model + recompute (what HFU counts)
};
ComputeFlops compute_flops(const Config& config);

// Forward FLOPs per token of each model unit in model order: embedding, block 0 .. L-1, head (L + 2 entries),
// the recompute FLOPs per token of each (0 for embedding and head), and the part of each one's backward that is its
// linears' weight gradients (gᵀx: 2 FLOPs per weight per token; what zero bubble's W runs).
struct UnitFlops {
  std::vector<double> forward, recompute, weight_grad;
};
UnitFlops unit_flops_per_token(const Config& config);

// The linear layers one micro-step runs: 7 per block (wq, wk, wv, wo and the MLP's three) + the head. The fixed
// part of a micro-step is counted per layer (profile gemm_overhead_us; dtlab calibrate divides by the same count).
double linear_layers(const ModelConfig& model);

struct ComputeTime {
  double rate_tflops = 0;  // the achieved rate per rank used (matmul × efficiency × thread factor)
  double forward_ms = 0;   // one micro-step's forward on one rank
  double backward_ms = 0;  // one micro-step's backward, recompute included
  double overhead_ms = 0;  // the fixed part of one micro-step (in forward_ms and backward_ms)
  double step_ms = 0;      // accumulation × (forward + backward)
  std::vector<std::string> notes;
};
// REQUIRES: a valid config; profile rates > 0.
ComputeTime compute_time(const Config& config, const MachineProfile& profile);

// The rate (TFLOP/s) one rank achieves in training under `config` on `profile` (see the header comment).
double achieved_tflops(const Config& config, const MachineProfile& profile, std::vector<std::string>* notes = nullptr);

// How much faster a rank computes than achieved_tflops assumes when, of the ranks sharing this machine's cores, only a
// `busy_share` (0..1] of them compute at a time on average (pipeline stages idle in their bubble): achieved_tflops
// gives each of R ranks on C < R cores C/R of a core; with R·busy_share of them computing, each gets
// min(its threads, C/(R·busy_share)). 1 when the cores are not oversubscribed or the profile has no core count.
double idle_sharers_speedup(const Config& config, const MachineProfile& profile, double busy_share);

}  // namespace dtlab::analysis
