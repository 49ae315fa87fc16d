// advise.hpp: the strategy advisor — searches the configurations a job could train with, predicts each one's memory
// per rank and step time with the cost models, keeps those under a memory budget, ranks them and says why the winner
// won (torch-free; `dtlab advise`; `dtlab max-batch` is analysis/cost/max_batch.hpp).
//
//   AdviseRequest r{.base = load_config("scenarios/configs/small.yaml", {}, 2), .profile = profile,
//                   .budget_bytes = 512LL << 20};
//   Advice a = advise(r);          // a.ranked: fitting candidates, fastest first; a.excluded: the rest, with reasons
//   std::printf("%s", format_advice(a, 5).c_str());
//
// The search (every axis a strategy reads, from its catalogue entry's keys — strategies/spec.hpp):
//   strategy                  every catalogue strategy the world size allows (config validation decides)
//   activation checkpointing  none | selective | full | full every 2nd block (parallel.checkpoint_every=2)
//   precision                 fp32 | bf16 (parameters and gradient reduction in that dtype, masters as the base
//                             config's; no loss scaler), and fp16 with the base's loss scaler when the base is fp16
//   offload                   off | on, for strategies that read parallel.offload
//   micro-batch               every power-of-two divisor of the per-rank batch (accumulation makes up the rest);
//                             the base config's train.micro_batch is only where the search starts: it need not
//                             divide the per-rank batch at the job's world size (starting_micro_batch)
//   granularity               DDP's parallel.bucket_cap_mb 1 | 4 | 25 | 100; FSDP's parallel.wrap
//                             block | every_2 | every_4 | model
//   model parallelism         pipeline stages pp 1 | 2 | 4 with each schedule (strategies that run under stages), times
//                             tensor parallelism tp 1 | 2 | 4 with and without sequence parallelism, where pp·tp
//                             divides the world
// A candidate is the base config with those keys set (Candidate::overrides, which `dtlab train` accepts as they
// are). Its peak is the largest predicted peak of rank 0 and the last rank (sharding pads the last shard).
//
// Exclusions (Candidate::exclusion):
//   over_budget  the predicted peak is above the budget: `reason` names the amount over and the largest category
//   refused      config validation or the strategy's own check refuses the combination (e.g. DDP with bf16
//                compute, a master copy narrower than the parameters), in their words
// Ranking of the fitting candidates: predicted step time; equal times (identical plans, e.g. a bucket cap above the
// model's size) by lower peak, then by fewer changes from the base config, then by search order. The same job under
// other names — settings that differ only in granularity or strategy (HYBRID whose shard group is the world is
// FULL_SHARD) and predict identically — is folded into the first (Candidate::equivalent). Rows within kTieFraction of
// the row above are marked as ties: the model cannot separate them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/cost/memory_model.hpp"
#include "analysis/cost/profile.hpp"
#include "lab/config.hpp"

namespace dtlab::analysis {

// Two predicted step times closer than this fraction are a tie.
inline constexpr double kTieFraction = 0.01;

struct AdviseRequest {
  // The model, batch and everything not searched (world_size, ranks_per_node set). Its train.micro_batch and
  // train.accumulation may break the batch rule at this world size (the advisor chooses them).
  Config base;
  MachineProfile profile;    // already on the job's topology (analysis/cost/topology.hpp)
  int64_t budget_bytes = 0;  // memory per rank; REQUIRES > 0
};

// The searched settings of one candidate, as words and as the overrides that produce it.
struct CandidateSettings {
  std::string strategy;
  std::string activation_checkpointing = "none";  // none | selective | full | full/2 (every 2nd block)
  std::string precision = "fp32";                 // fp32 | bf16 | fp16
  bool offload = false;
  int64_t micro_batch = 1, accumulation = 1;  // accumulation = the pipeline's micro-batches m when pp > 1
  // Pipeline stages (strategies with StrategySpec::runs_under_pipeline): pp 1, 2, 4 where the world allows, each
  // with gpipe | 1f1b | interleaved_1f1b (2 chunks per rank) | zero_bubble; "" at pp 1.
  int64_t pp = 1;
  std::string pp_schedule;
  // Tensor parallelism: tp 1, 2, 4 where pp·tp divides the world (the model's split rules are validation's), each
  // with and without sequence parallelism; the strategy shards or replicates over the ranks left.
  int64_t tp = 1;
  bool sequence_parallel = false;
  std::string granularity;             // "bucket 25 MiB" | "wrap block" | "" (the strategy reads neither)
  std::vector<std::string> overrides;  // section.key=value, applied to the base config
};

struct Candidate {
  CandidateSettings settings;
  std::string exclusion;  // "" = fits | over_budget | refused
  std::string reason;     // why excluded ("" when it fits)
  // Predictions (zero for refused candidates).
  MemoryPrediction memory;  // of the rank with the larger peak
  double step_ms = 0, tokens_per_s = 0, compute_ms = 0, comm_ms = 0, exposed_comm_ms = 0;
  int changes = 0;                 // settings that differ from the base config
  int order = 0;                   // position in the search
  bool tie_with_previous = false;  // ranked: within kTieFraction of the candidate ranked above
  // ranked: what was folded into this one (the same job: "bucket 1 MiB", or "fsdp_hybrid wrap block")
  std::vector<std::string> equivalent;
  // The settings in one short line (describe(settings)): "fsdp_full_shard, AC selective, bf16, micro-batch 2 x 4, wrap
  // block".
  std::string describe() const;
  // The `dtlab train` overrides of this candidate, space separated.
  std::string overrides_text() const;
};

struct Advice {
  int64_t budget_bytes = 0;
  int64_t world_size = 1, nodes = 1;
  std::string profile, label;            // label: prediction | projection (as predict())
  std::vector<Candidate> ranked;         // fitting, best first
  std::vector<Candidate> excluded;       // in search order
  std::vector<std::string> explanation;  // why the winner (empty when nothing fits)
  // The nearest rejected: as fast as the winner (within kTieFraction) or faster, but over the budget; nearest first,
  // at most three.
  std::vector<Candidate> rejected;
  std::vector<std::string> if_nothing_fits;  // what would fit (empty when something fits)
  std::vector<std::string> notes;            // assumptions (the profile's adjustments, offload on a CPU, ...)
  const Candidate* winner() const { return ranked.empty() ? nullptr : &ranked.front(); }
};

// Where the micro-batch search starts: the base's train.micro_batch when it divides the per-rank batch
// (global_batch / data-parallel ranks), else the largest micro-batch below it that does; the base's own when the
// per-rank batch is not whole (the batch rule then refuses the config whatever the micro-batch).
int64_t starting_micro_batch(const Config& base);
// The base config at the starting micro-batch, with the accumulation that makes up the rest.
Config at_starting_micro_batch(const Config& base);

// Searches, predicts, ranks and explains. Throws ConfigError when the base config is invalid at its starting
// micro-batch (e.g. an unknown model.preset), std::invalid_argument when budget_bytes <= 0.
Advice advise(const AdviseRequest& request);

// The ranked table (top `top` rows), the explanation, the nearest rejected alternatives, the exclusion counts by
// reason, and, when nothing fits, what would.
std::string format_advice(const Advice& advice, int top);
// The same as JSON: {budget_bytes, world_size, nodes, profile, label, ranked:[...], excluded:[...] (every one),
// explanation, rejected, if_nothing_fits, notes}; each candidate {settings{...}, overrides, exclusion, reason,
// memory_bytes{params, grads, optimizer, buffers, activations, logits, peak}, step_ms, tokens_per_s, comm_ms,
// exposed_comm_ms, equivalent, changes, tie_with_previous}.
nlohmann::json to_json(const Advice& advice);
nlohmann::json to_json(const Candidate& candidate);

// "fsdp_full_shard, AC selective, bf16, micro-batch 2 x 4, wrap block"; "ddp, pp 2 1f1b, no AC, ..." with stages
std::string describe(const CandidateSettings& settings);
// The model-parallel layout (the explanation's axis): "none" at pp 1 and tp 1, else "pp 2 1f1b", "tp 2 sp",
// "pp 2 1f1b, tp 2".
std::string layout_text(const CandidateSettings& settings);

// "1.50 GiB", "512.0 MiB", "12.0 KiB", "100 B".
std::string format_bytes(double bytes);

}  // namespace dtlab::analysis
