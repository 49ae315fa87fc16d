// memory_rank.cpp: one rank of the memory exactness check (run under `dtlab launch -n W`).
//
// Trains train.steps (default 2) steps of the requested strategy; after every step each rank checks
//   0. what the counting allocator MEASURED in each category (lab/memory.hpp: every tensor's bytes are counted
//      under the category its allocation site declares) equals cost_plan(config, rank).state exactly for params,
//      grads and optimizer (the bytes alive after the step), and so do the bytes counted as host memory (offload's
//      master shards, their gradients and the optimizer state: the plan's state.host, 0 without offload); the buffers'
//      measured peak equals the plan's for every strategy in every precision (the gathered units, their gradients,
//      their reduce-dtype wire copies, the reduce-scatter outputs, the compute copies of the masters, the gradient
//      shards, zero1's all-gather source buffer, a bf16 master's fp32 scratch during the optimizer step, DDP's
//      reduce-dtype bucket copies; a scalar operand ATen wraps in a 0-dim tensor is `other`, not a buffer); and the
//      measured activation peak (activations category: saved tensors, backward temporaries, the batch, RoPE tables) is
//      within 10% of the activation model (analysis/cost/memory_model.hpp; a pipeline stage's: pipeline_model.hpp) —
//      the model counts our forward term by term, but autograd's transient temporaries are only approximated
//      (docs/cost-models.md); The measured comm peak is at least the larger of the largest backward ring
//      reduce-scatter's scratch (two chunks of the unit's wire dtype) and Gloo's largest all-gather staging (its whole
//      output), both allocated every step, and at most that scratch plus a backward re-gather's staging (they overlap):
//      bounds counted here from the plan's collectives;
//   1. strategy.state_bytes() == cost_plan(config, rank).state, category by category, exactly;
//   2. params + grads + optimizer equals the ZeRO-paper bookkeeping for fp32 (4 bytes/param, 4 bytes/grad,
//      optimizer s bytes/element: AdamW 8, SGD+momentum 4), computed here independently of the cost plan
//      from the model's own units:
//        ddp, fsdp_no_shard   (4 + 4 + s)·Ψ                        (= 16Ψ for AdamW)
//        zero1                4·Ψp + 4·Ψp + s·e_r                  Ψp = Σ padded units, e_r = this rank's
//                                                                  non-padding shard elements
//      (offload: no_shard and zero1 also keep a separate fp32 master shard, + 4·S_r)
//        fsdp_full_shard / fsdp_shard_grad_op / fsdp_hybrid
//                             4·S_r + 4·S_r + s·e_r                S_r = Σ shard elements incl. padding
//                                                                  (= 16Ψ/N plus padding for AdamW)
// Rank 0 prints the formula with its values and the memory_report() JSON. Exits 1 on any mismatch
// (every rank prints its own).
//
//   dtlab launch -n 2 memory_rank [--] key=value...
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "analysis/cost/memory_model.hpp"
#include "analysis/cost/pipeline_model.hpp"
#include "lab/config.hpp"
#include "lab/dist/dist_world.hpp"
#include "lab/dist/rank_env.hpp"
#include "lab/memory.hpp"
#include "lab/model.hpp"
#include "lab/train/tensor_parallel_plan.hpp"
#include "lab/train/trainer.hpp"
#include "lab/unit_layout.hpp"
#include "strategies/catalog.hpp"
#include "strategies/cost_plan.hpp"
#include "strategies/registry.hpp"

namespace {

struct Args {
  std::vector<std::string> overrides;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--")
      continue;
    else
      a.overrides.push_back(s);
  }
  return a;
}

std::vector<std::string> with_defaults(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"model.preset=tiny",        "train.steps=2",   "train.global_batch=8",
                                  "train.warmup_steps=0",     "train.threads=1", "train.lr=3e-3",
                                  "instrument.log_every=1000"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return all;
}

// Element counts of the engine's units on `rank`, from the model itself (not the cost plan): per parallel.wrap, cut at
// its pipeline chunks' edges (held_unit_groups, whose cuts tests/unit/model_shape_test.cpp writes out by hand), and
// under tensor parallelism (tp > 1) of this rank's slices (tensor_parallel_axis, the runtime plan's rule). `model`
// holds this rank's units only.
std::vector<int64_t> unit_numels(dtlab::GPT& model, const dtlab::Config& config, int rank) {
  const int L = static_cast<int>(config.model.n_layers);
  std::map<int, int64_t> per_model_unit;  // model unit number (0 embedding, 1..L blocks, L+1 head) -> elements
  for (const auto& u : model.units()) {
    const int m = u.name == "embedding" ? 0 : u.name == "head" ? L + 1 : std::stoi(u.name.substr(6)) + 1;
    for (const auto& p : u.params)
      per_model_unit[m] += p.tensor->numel() / (dtlab::tensor_parallel_axis(p.name) >= 0 ? config.parallel.tp : 1);
  }
  std::vector<int64_t> out;
  for (const auto& group : dtlab::held_unit_groups(config.parallel.wrap, L, dtlab::chunks_on_rank(config, rank))) {
    int64_t n = 0;
    for (int m : group) n += per_model_unit.at(m);
    out.push_back(n);
  }
  return out;
}

struct Expected {
  int64_t bytes = 0;
  std::string formula;
};

Expected zero_paper_bytes(const dtlab::Config& config, int rank) {
  dtlab::GPT model(config.model, config.train.seed);
  if (config.parallel.pp > 1) model.keep_units(dtlab::units_on_rank(config, rank));
  const std::string& id = config.parallel.strategy;
  // Ψ: the parameters this rank holds — its pipeline stage's, under tensor parallelism its slices (1/tp of each
  // tensor the runtime plan splits, tensor_parallel_axis; the norms whole), counted from the model's tensors, not
  // from the cost plan.
  int64_t psi = model.parameter_count();
  if (config.parallel.tp > 1) {
    psi = 0;
    for (const dtlab::ParamRef& p : model.parameters())
      psi += p.tensor->numel() / (dtlab::tensor_parallel_axis(p.name) >= 0 ? config.parallel.tp : 1);
  }
  const int64_t s = config.train.optimizer == "adamw" ? 8 : config.train.momentum != 0.0 ? 4 : 0;
  // The data-parallel ranks (tp innermost, pp outermost).
  const int64_t data_parallel = config.world_size / (config.parallel.tp * config.parallel.pp);
  char buf[512];
  // Offload keeps a separate fp32 master shard beside the flat parameters of no_shard / zero1.
  const int64_t master_copy = config.parallel.offload && (id == "fsdp_no_shard" || id == "zero1") ? 4 : 0;
  if (!dtlab::strategy_spec(id).hooks_unit_outputs || id == "fsdp_no_shard") {  // full replicas (no_shard: F = 1)
    std::snprintf(buf, sizeof buf, "(4 + 4 + %lld + %lld)·Ψ, Ψ = %lld", static_cast<long long>(master_copy),
                  static_cast<long long>(s), static_cast<long long>(psi));
    return {(8 + master_copy + s) * psi, buf};
  }
  const int64_t F = id == "fsdp_hybrid" && config.parallel.shard_size > 0 ? config.parallel.shard_size : data_parallel;
  const int64_t shard_rank = rank / config.parallel.tp % F;
  int64_t padded_total = 0, shard_total = 0, non_padding = 0;
  for (int64_t n : unit_numels(model, config, rank)) {
    const int64_t padded = (n + F - 1) / F * F, shard = padded / F, begin = shard_rank * shard;
    padded_total += padded;
    shard_total += shard;
    non_padding += std::max<int64_t>(0, std::min(begin + shard, n) - begin);
  }
  if (id == "zero1") {
    std::snprintf(
        buf, sizeof buf,
        "4·Ψp + 4·Ψp + %lld·S_r + %lld·e_r, Ψ = %lld, Ψp = Ψ + padding = %lld, e_r = %lld (N = %lld: %lld·Ψ/N = %.1f)",
        static_cast<long long>(master_copy), static_cast<long long>(s), static_cast<long long>(psi),
        static_cast<long long>(padded_total), static_cast<long long>(non_padding), static_cast<long long>(F),
        static_cast<long long>(s), static_cast<double>(s * psi) / static_cast<double>(F));
    return {8 * padded_total + master_copy * shard_total + s * non_padding, buf};
  }
  std::snprintf(buf, sizeof buf,
                "4·S_r + 4·S_r + %lld·e_r, Ψ = %lld, N = %lld, S_r = %lld (incl. padding), e_r = %lld "
                "(%lld·Ψ/N = %.1f; padding in params+grads here %lld bytes)",
                static_cast<long long>(s), static_cast<long long>(psi), static_cast<long long>(F),
                static_cast<long long>(shard_total), static_cast<long long>(non_padding), static_cast<long long>(8 + s),
                static_cast<double>((8 + s) * psi) / static_cast<double>(F),
                static_cast<long long>(8 * (shard_total - non_padding)));
  return {8 * shard_total + s * non_padding, buf};
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    dtlab::install_counting_allocator();  // before any model tensor, so every storage is counted
    const dtlab::RankEnv env = dtlab::discover_rank_env({}, dtlab::current_environment());
    const dtlab::Config config = dtlab::load_config("", with_defaults(args.overrides), env.world_size);
    const bool main_rank = env.rank == 0;
    dtlab::RendezvousOptions rendezvous;
    rendezvous.timeout = std::chrono::seconds(60);
    dtlab::DistWorld world(env, rendezvous);
    auto strategy = dtlab::make_strategy(config.parallel.strategy);

    int failures = 0;
    const dtlab::CostPlan plan = dtlab::cost_plan(config, env.rank);
    const Expected expected = zero_paper_bytes(config, env.rank);
    // The ZeRO bookkeeping is the fp32 one (4-byte params and grads); mixed precision is held to the plan and to the
    // measured bytes only.
    const bool fp32_state = config.precision.param_dtype == "fp32" && config.precision.master_dtype == "fp32";
    // The comm category's bounds, from the plan: every ring reduce-scatter (in backward, or after a pipeline's flush
    // or a chunk's backward) allocates two chunks of its wire dtype, and Gloo's all-gather stages its whole output,
    // every step. They overlap only when a backward
    // re-gather stages beside a ring (with prefetch, during a block's backward: the memory model's comm terms;
    // without, while the backward waits for the gather); otherwise the larger of them is the peak.
    int64_t ring_scratch = 0, gather_staging = 0, regather_staging = 0;
    for (const auto& c : plan.collectives) {
      if (c.group_size < 2) continue;
      if (c.op == "reduce_scatter" && c.algorithm == "ring" && (c.phase == "backward" || c.phase == "after-backward"))
        ring_scratch = std::max(ring_scratch, dtlab::analysis::ring_reduce_scatter_scratch_bytes(c));
      if (c.op == "all_gather" && c.algorithm == "backend") {
        gather_staging = std::max(gather_staging, c.bytes);
        if (c.phase == "backward") regather_staging = std::max(regather_staging, c.bytes);
      }
    }
    const int64_t comm_floor = std::max(ring_scratch, gather_staging);
    const int64_t comm_ceiling = std::max(gather_staging, ring_scratch + regather_staging);
    dtlab::TrainOptions options;
    options.print_steps = options.print_config = false;
    const bool sharded = dtlab::strategy_spec(config.parallel.strategy).hooks_unit_outputs;
    // Under pipeline stages: the stage's blocks times the micro-batches its schedule keeps in flight on this rank.
    const int64_t model_activation_peak = [&] {
      if (config.parallel.pp > 1) {
        const dtlab::analysis::MemoryPrediction stage =
            dtlab::analysis::pipeline_stage_memory(config, plan, "gloo", env.rank);
        return stage.activations + stage.logits;
      }
      const dtlab::analysis::ActivationPeak model_peak = dtlab::analysis::activation_peak(config, sharded);
      return model_peak.activations + model_peak.logits;
    }();
    options.after_step = [&](int64_t step, dtlab::Strategy& s) {
      using dtlab::MemoryCategory;
      const struct {
        const char* what;
        int64_t measured, planned;
      } measured[] = {
          {"params", dtlab::cpu_tensor_memory(MemoryCategory::params).current_bytes, plan.state.params},
          {"grads", dtlab::cpu_tensor_memory(MemoryCategory::grads).current_bytes, plan.state.grads},
          {"optimizer", dtlab::cpu_tensor_memory(MemoryCategory::optimizer).current_bytes, plan.state.optimizer},
          // offload's host buffers (HostMemoryScope), apart from the device-side bytes; 0 without offload
          {"host memory", dtlab::host_tensor_memory().current_bytes, plan.state.host}};
      for (const auto& m : measured)
        if (m.measured != m.planned) {
          ++failures;
          std::printf("rank %d step %lld: the allocator measured %lld bytes of %s, the cost plan says %lld\n", env.rank,
                      static_cast<long long>(step), static_cast<long long>(m.measured), m.what,
                      static_cast<long long>(m.planned));
        }
      const int64_t buffers_peak = dtlab::cpu_tensor_memory(MemoryCategory::buffers).peak_bytes;
      if (buffers_peak != plan.state.buffers) {
        ++failures;
        std::printf(
            "rank %d step %lld: measured buffers peak %lld bytes (gathered units, their gradients and wire copies, "
            "reduce-scatter outputs), the cost plan says %lld\n",
            env.rank, static_cast<long long>(step), static_cast<long long>(buffers_peak),
            static_cast<long long>(plan.state.buffers));
      }
      const int64_t comm_peak = dtlab::cpu_tensor_memory(MemoryCategory::comm).peak_bytes;
      if (comm_peak < comm_floor || comm_peak > comm_ceiling) {
        ++failures;
        std::printf(
            "rank %d step %lld: measured comm peak %lld bytes, outside [%lld, %lld]: the largest of the ring "
            "reduce-scatter's scratch (%lld) and Gloo's gather staging (%lld), up to the scratch plus a backward "
            "re-gather's staging (%lld)\n",
            env.rank, static_cast<long long>(step), static_cast<long long>(comm_peak),
            static_cast<long long>(comm_floor), static_cast<long long>(comm_ceiling),
            static_cast<long long>(ring_scratch), static_cast<long long>(gather_staging),
            static_cast<long long>(regather_staging));
      }
      const int64_t activation_peak = dtlab::cpu_tensor_memory(MemoryCategory::activations).peak_bytes;
      const double activation_error =
          static_cast<double>(activation_peak - model_activation_peak) / static_cast<double>(model_activation_peak);
      if (std::abs(activation_error) > 0.10) {
        ++failures;
        std::printf(
            "rank %d step %lld: measured activation peak %lld bytes, the model says %lld (%+.1f%%, over 10%%)\n",
            env.rank, static_cast<long long>(step), static_cast<long long>(activation_peak),
            static_cast<long long>(model_activation_peak), 100.0 * activation_error);
      }
      if (step == config.train.steps)
        std::printf(
            "rank %d measured: params %lld grads %lld optimizer %lld | buffers peak %lld (plan %lld) | comm peak "
            "%lld | activations peak %lld (model %lld, %+.1f%%) | other %lld\n",
            env.rank, static_cast<long long>(measured[0].measured), static_cast<long long>(measured[1].measured),
            static_cast<long long>(measured[2].measured), static_cast<long long>(buffers_peak),
            static_cast<long long>(plan.state.buffers),
            static_cast<long long>(dtlab::cpu_tensor_memory(MemoryCategory::comm).peak_bytes),
            static_cast<long long>(activation_peak), static_cast<long long>(model_activation_peak),
            100.0 * activation_error,
            static_cast<long long>(dtlab::cpu_tensor_memory(MemoryCategory::other).current_bytes));
      const dtlab::StateBytes real = s.state_bytes();
      const struct {
        const char* what;
        int64_t real, planned;
      } rows[] = {{"params", real.params, plan.state.params},
                  {"grads", real.grads, plan.state.grads},
                  {"optimizer", real.optimizer, plan.state.optimizer},
                  {"buffers", real.buffers, plan.state.buffers},
                  {"host", real.host, plan.state.host}};
      for (const auto& r : rows)
        if (r.real != r.planned) {
          ++failures;
          std::printf("rank %d step %lld: state_bytes().%s = %lld but the cost plan says %lld\n", env.rank,
                      static_cast<long long>(step), r.what, static_cast<long long>(r.real),
                      static_cast<long long>(r.planned));
        }
      const int64_t pgo = real.params + real.grads + real.optimizer;
      if (fp32_state && pgo != expected.bytes) {
        ++failures;
        std::printf("rank %d step %lld: params+grads+optimizer = %lld bytes, formula %s = %lld\n", env.rank,
                    static_cast<long long>(step), static_cast<long long>(pgo), expected.formula.c_str(),
                    static_cast<long long>(expected.bytes));
      }
      std::fflush(stdout);
    };
    const auto outcome = dtlab::train(config, *strategy, world, dtlab::device_mesh(config), options);
    const dtlab::StateBytes real = strategy->state_bytes();
    // Every rank prints its line (ranks differ by padding); the test reads them all.
    std::printf("rank %d %s: params %lld grads %lld optimizer %lld buffers %lld | params+grads+optimizer %lld = %s\n",
                env.rank, config.parallel.strategy.c_str(), static_cast<long long>(real.params),
                static_cast<long long>(real.grads), static_cast<long long>(real.optimizer),
                static_cast<long long>(real.buffers), static_cast<long long>(real.params + real.grads + real.optimizer),
                expected.formula.c_str());
    if (main_rank) std::printf("memory_report %s\n", dtlab::memory_report(real, env.rank).dump().c_str());
    std::fflush(stdout);
    const double all_failures = world.all_reduce_sum(failures);
    if (all_failures > 0) {
      std::printf("rank %d: memory FAILED (%d mismatches here, %g in the job)\n", env.rank, failures, all_failures);
      return 1;
    }
    if (main_rank)
      std::printf("memory OK: %s, world %d, %zu steps\n", config.parallel.strategy.c_str(), env.world_size,
                  outcome.steps.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memory_rank: %s\n", e.what());
    return 1;
  }
}
