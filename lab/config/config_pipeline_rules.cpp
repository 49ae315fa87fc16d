// config_pipeline_rules.cpp: validation of parallel.pp and its keys (lab/train/pipeline_step.hpp runs them).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "lab/config/config_internal.hpp"
#include "lab/pipeline_schedule.hpp"
#include "lab/pipeline_split.hpp"

namespace dtlab::config_internal {

void check_pipeline_rules(const Config& c, const StrategyChoices& strategies) {
  const ParallelConfig& p = c.parallel;
  const auto n = [](int64_t x) { return std::to_string(x); };
  if (p.pp == 1) {
    if (p.pp_virtual_stages != 1)
      throw Problem{"parallel.pp_virtual_stages", "parallel.pp_virtual_stages=" + n(p.pp_virtual_stages) +
                                                      " needs parallel.pp > 1: model chunks are per pipeline rank"};
    if (!p.pp_split.empty())
      throw Problem{"parallel.pp_split",
                    "parallel.pp_split=" + p.pp_split + " needs parallel.pp > 1: it places the pipeline's stages"};
    if (p.pp_reshard_after_forward)
      throw Problem{"parallel.pp_reshard_after_forward",
                    "parallel.pp_reshard_after_forward=true needs parallel.pp > 1: without stages the sharded modes "
                    "that free parameters already free each unit after its forward"};
    return;
  }
  const std::string pp = "parallel.pp=" + n(p.pp);
  const std::vector<std::string>& able_ids = strategies.under_pipeline;
  if (std::find(able_ids.begin(), able_ids.end(), p.strategy) == able_ids.end()) {
    const std::string able = join(able_ids, " | ");
    throw Problem{"parallel.strategy", "parallel.strategy=" + p.strategy + " with " + pp +
                                           ": this strategy cannot run under pipeline stages (one that can hands "
                                           "the schedule its stage's model and reduces the gradients of the "
                                           "schedule's backwards after the flush: its spec's runs_under_pipeline): "
                                           "use " +
                                           (able.empty() ? std::string("parallel.pp=1") : able)};
  }
  const std::vector<std::string>& regathering = strategies.reshard_under_pipeline;
  if (p.pp_reshard_after_forward && std::find(regathering.begin(), regathering.end(), p.strategy) == regathering.end())
    throw Problem{
        "parallel.pp_reshard_after_forward",
        "parallel.pp_reshard_after_forward=true with parallel.strategy=" + p.strategy +
            ": only a strategy that frees each unit's parameters after its forward can re-gather them per "
            "micro-batch (fsdp_shard_grad_op keeps them through backward by definition; ddp, zero1 and "
            "fsdp_no_shard hold them whole): use " +
            (regathering.empty() ? std::string("parallel.pp_reshard_after_forward=false") : join(regathering, " | ")) +
            ", or false"};
  if (c.model.tie_embeddings)
    throw Problem{"model.tie_embeddings", "model.tie_embeddings=true with " + pp +
                                              ": the embedding (first stage) and the head (last stage) would share "
                                              "one weight across ranks, which is not built; set it false"};
  const std::optional<PipeSchedule> schedule = parse_pipe_schedule(p.pp_schedule);
  if (!schedule)
    throw Problem{"parallel.pp_schedule",
                  "parallel.pp_schedule=" + p.pp_schedule + " must be one of " + std::string(kPipeScheduleNames)};
  if (*schedule == PipeSchedule::zero_bubble && p.activation_checkpointing != "none")
    throw Problem{"parallel.activation_checkpointing",
                  "parallel.activation_checkpointing=" + p.activation_checkpointing +
                      " with parallel.pp_schedule=zero_bubble: the split backward (B, then W) would recompute each "
                      "checkpointed block twice, which is not built; use activation_checkpointing=none or 1f1b"};
  // The schedule's own rules (m >= P, m % P == 0 for interleaving, v only with interleaving) name themselves.
  const PipeShape shape{.stages = static_cast<int>(p.pp),
                        .micro_batches = static_cast<int>(c.train.accumulation),
                        .virtual_stages = static_cast<int>(p.pp_virtual_stages)};
  try {
    (void)pipe_program(*schedule, shape);
  } catch (const std::invalid_argument& e) {
    throw Problem{"parallel.pp_schedule", "parallel.pp_schedule=" + p.pp_schedule + " with " + pp +
                                              " and train.accumulation=" + n(c.train.accumulation) +
                                              " micro-batches per data-parallel rank: " + e.what()};
  }
  try {
    (void)pipeline_stage_units(static_cast<int>(c.model.n_layers), static_cast<int>(p.pp * p.pp_virtual_stages),
                               p.pp_split);
  } catch (const std::invalid_argument& e) {
    throw Problem{p.pp_split.empty() ? "model.n_layers" : "parallel.pp_split", e.what()};
  }
}

}  // namespace dtlab::config_internal
