// compute_model.cpp: training FLOPs per token and their time at a calibrated rate (see compute_model.hpp).
#include "analysis/cost/compute_model.hpp"

#include <algorithm>
#include <cstdio>

#include "lab/model_shape.hpp"

namespace dtlab::analysis {

UnitFlops unit_flops_per_token(const Config& config) {
  const ModelConfig& m = config.model;
  const double d = static_cast<double>(m.d_model), s = static_cast<double>(m.seq_len);
  const double hd = d / static_cast<double>(m.n_heads);
  const double attention_params = 2 * d * d + 2 * static_cast<double>(m.n_kv_heads) * hd * d;  // wq, wo, wk, wv
  const double mlp_params = 3 * static_cast<double>(m.ffn_hidden) * d;
  const double attention_forward = 2 * attention_params + 4 * d * s;
  const double block_forward = attention_forward + 2 * mlp_params;
  const int64_t L = m.n_layers;
  const std::string& ac = config.parallel.activation_checkpointing;
  const int64_t every = std::max<int64_t>(1, config.parallel.checkpoint_every);

  UnitFlops u;
  u.forward.push_back(0);  // embedding: a gather
  u.recompute.push_back(0);
  u.weight_grad.push_back(0);
  for (int64_t l = 0; l < L; ++l) {
    u.forward.push_back(block_forward);
    u.recompute.push_back(ac == "full" && l % every == 0 ? block_forward : ac == "selective" ? attention_forward : 0.0);
    u.weight_grad.push_back(2 * (attention_params + mlp_params));
  }
  u.forward.push_back(2 * static_cast<double>(m.vocab_size) * d);  // LM head
  u.recompute.push_back(0);
  u.weight_grad.push_back(2 * static_cast<double>(m.vocab_size) * d);
  return u;
}

ComputeFlops compute_flops(const Config& config) {
  ComputeFlops f;
  f.model_per_token = model_counts(config.model).flops_per_token;
  for (double r : unit_flops_per_token(config).recompute) f.recompute_per_token += r;
  f.executed_per_token = f.model_per_token + f.recompute_per_token;
  return f;
}

namespace {
// The ranks sharing the profile's cores: the launcher's count when known (an emulated cluster's nodes all run on this
// machine), else the node's ranks.
double ranks_sharing_cores(const Config& config, const MachineProfile& profile) {
  const int64_t sharing = config.host_ranks > 0 ? config.host_ranks : std::max(1, profile.comm.ranks_per_node);
  return static_cast<double>(std::max<int64_t>(1, std::min<int64_t>(config.world_size, sharing)));
}

// A rank's threads: train.threads, else the cores split among the ranks (at least 1).
double configured_threads(const Config& config, const MachineProfile& profile, double ranks_here) {
  const int cores = profile.compute.cores;
  return config.train.threads > 0 ? static_cast<double>(config.train.threads)
         : cores > 0              ? std::max(1.0, static_cast<double>(cores / static_cast<int>(ranks_here)))
                                  : static_cast<double>(profile.compute.threads);
}
}  // namespace

double idle_sharers_speedup(const Config& config, const MachineProfile& profile, double busy_share) {
  const int cores = profile.compute.cores;
  if (cores <= 0 || profile.compute.threads <= 0 || busy_share <= 0) return 1.0;
  const double ranks_here = ranks_sharing_cores(config, profile),
               threads = configured_threads(config, profile, ranks_here);
  const double all_computing = std::min(threads, static_cast<double>(cores) / ranks_here);
  const double some_computing =
      std::min(threads, static_cast<double>(cores) / (ranks_here * std::min(1.0, busy_share)));
  return std::max(1.0, some_computing / all_computing);
}

double achieved_tflops(const Config& config, const MachineProfile& profile, std::vector<std::string>* notes) {
  bool fell_back = false;
  const double matmul = matmul_tflops_for(profile, config.precision.param_dtype, &fell_back);
  if (fell_back && notes)
    notes->push_back("profile " + profile.name + " has no matmul rate for " + config.precision.param_dtype +
                     "; used its float32 rate");
  double factor = 1.0;
  if (profile.compute.threads > 0) {
    const double ranks_here = ranks_sharing_cores(config, profile);
    const int cores = profile.compute.cores;
    double threads = configured_threads(config, profile, ranks_here);
    if (cores > 0) threads = std::min(threads, static_cast<double>(cores) / ranks_here);  // oversubscribed cores
    // The threads the rates were measured with, in the same terms: a calibration whose rank and companions
    // oversubscribed the cores (an emulated cluster's 4 ranks on 2 cores) measured a shared core's rate already.
    double measured = static_cast<double>(profile.compute.threads);
    if (cores > 0 && profile.compute.ranks > 0)
      measured = std::min(measured, static_cast<double>(cores) / static_cast<double>(profile.compute.ranks));
    factor = threads / measured;
    if (notes && factor != 1.0) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "CPU rate scaled linearly from %.2f measured effective thread(s) to %.2f per rank",
                    measured, threads);
      notes->push_back(buf);
    }
  }
  const double efficiency = train_efficiency_for(profile, config.precision.param_dtype, config.model.d_model);
  if (notes && efficiency != train_efficiency_for(profile, config.precision.param_dtype)) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "training efficiency %.3f at d_model=%lld, from the profile's widths", efficiency,
                  static_cast<long long>(config.model.d_model));
    notes->push_back(buf);
  }
  return matmul * efficiency * factor;
}

double linear_layers(const ModelConfig& model) { return 7.0 * static_cast<double>(model.n_layers) + 1.0; }

ComputeTime compute_time(const Config& config, const MachineProfile& profile) {
  ComputeTime t;
  t.rate_tflops = achieved_tflops(config, profile, &t.notes);
  const ComputeFlops f = compute_flops(config);
  const double tokens = static_cast<double>(config.train.micro_batch * config.model.seq_len);
  // Tensor parallelism splits every matmul (projections by heads or hidden units, attention by heads, the head by
  // vocabulary): each rank of a tp group runs 1/tp of the FLOPs on its micro-batch's tokens, in as many GEMM calls.
  const double ms_per_flop =
      1e3 / (t.rate_tflops * 1e12) / static_cast<double>(std::max<int64_t>(1, config.parallel.tp));
  const double forward = f.model_per_token / 3.0;
  t.overhead_ms = gemm_overhead_us_for(profile, config.precision.param_dtype) / 1e3 * linear_layers(config.model) *
                  (f.executed_per_token / f.model_per_token);
  t.forward_ms = tokens * forward * ms_per_flop + t.overhead_ms / 3.0;
  t.backward_ms = tokens * (2.0 * forward + f.recompute_per_token) * ms_per_flop + t.overhead_ms * 2.0 / 3.0;
  if (t.overhead_ms > 0) {
    char note[160];
    std::snprintf(note, sizeof note,
                  "compute includes %.1f ms per micro-step that does not grow with its tokens "
                  "(the profile's gemm_overhead_us)",
                  t.overhead_ms);
    t.notes.emplace_back(note);
  }
  t.step_ms = static_cast<double>(std::max<int64_t>(1, config.train.accumulation)) * (t.forward_ms + t.backward_ms);
  return t;
}

}  // namespace dtlab::analysis
