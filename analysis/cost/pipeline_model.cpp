// pipeline_model.cpp: a pipeline stage's memory and a pipeline step replayed on per-stage times (see
// pipeline_model.hpp).
#include "analysis/cost/pipeline_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/cost/compute_model.hpp"
#include "analysis/cost/memory_model.hpp"
#include "lab/dtype.hpp"
#include "lab/pipeline_schedule.hpp"
#include "lab/pipeline_split.hpp"

namespace dtlab::analysis {
namespace {

// One micro-batch's forward, backward and weight-pass times of each virtual stage, from the whole model's.
std::vector<PipeTimes> stage_times(const Config& config, const ComputeTime& whole, bool split_weight,
                                   double transfer_ms) {
  const UnitFlops flops = unit_flops_per_token(config);
  double forward_total = 0, backward_total = 0;
  for (size_t u = 0; u < flops.forward.size(); ++u) {
    forward_total += flops.forward[u];
    backward_total += 2 * flops.forward[u] + flops.recompute[u];
  }
  const int K = static_cast<int>(config.parallel.pp * config.parallel.pp_virtual_stages);
  std::vector<PipeTimes> out;
  const auto stages = pipeline_stage_units(static_cast<int>(config.model.n_layers), K, config.parallel.pp_split);
  for (size_t k = 0; k < stages.size(); ++k) {
    const std::vector<int>& units = stages[k];
    double f = 0, b = 0, w = 0;
    for (int u : units) {
      f += flops.forward[static_cast<size_t>(u)];
      b += 2 * flops.forward[static_cast<size_t>(u)] + flops.recompute[static_cast<size_t>(u)];
      w += flops.weight_grad[static_cast<size_t>(u)];
    }
    const double backward = whole.backward_ms * b / backward_total;
    PipeTimes t{.forward = whole.forward_ms * f / forward_total, .backward = backward, .transfer = transfer_ms};
    // Zero bubble: W is the linears' weight GEMMs (lab/weight_grad_store.hpp), B the rest of the backward: the
    // activations' gradients, attention's, the norms' and the embedding's.
    if (split_weight) t.weight = whole.backward_ms * w / backward_total, t.backward = backward - t.weight;
    out.push_back(t);
  }
  return out;
}

// FSDP re-gathering per micro-batch (parallel.pp_reshard_after_forward): what each virtual stage's actions add for
// one micro-batch — its units' forward gathers to F, their backward gathers to B, their reduce-scatters to B (to W
// under zero bubble, which reduces after it) — from the plan of the stage's first rank, whose per-micro-batch calls
// carry their chunk (strategies/sharded_plan.cpp). Counted unoverlapped: prefetching hides part of the gathers and
// the reduce-scatters run beside the backward, so this is an upper bound. All zero when gathered once per step.
std::vector<PipeTimes> per_micro_batch_comm(const Config& config, const MachineProfile& profile, bool split_weight) {
  const int P = static_cast<int>(config.parallel.pp), v = static_cast<int>(config.parallel.pp_virtual_stages);
  std::vector<PipeTimes> out(static_cast<size_t>(P * v), PipeTimes{.forward = 0, .backward = 0});
  const double micro_batches = static_cast<double>(std::max<int64_t>(1, config.train.accumulation));
  for (int r = 0; r < P && config.parallel.pp_reshard_after_forward; ++r) {
    for (const PlannedCollective& c : cost_plan(config, static_cast<int>(r * (config.world_size / P))).collectives) {
      if (c.chunk < 0 || c.phase == "setup") continue;
      PipeTimes& t = out[static_cast<size_t>(c.chunk * P + r)];
      const double ms = planned_collective_us(c, config, profile) / 1e3 * static_cast<double>(c.count) / micro_batches;
      if (c.op == "all_gather")
        (c.phase == "forward" ? t.forward : t.backward) += ms;
      else
        (split_weight ? t.weight : t.backward) += ms;
    }
  }
  return out;
}

std::vector<PipeTimes> with_comm(std::vector<PipeTimes> times, const std::vector<PipeTimes>& comm) {
  for (size_t k = 0; k < times.size(); ++k) {
    times[k].forward += comm[k].forward;
    times[k].backward += comm[k].backward;
    times[k].weight += comm[k].weight;
  }
  return times;
}

// Zero bubble: what one micro-batch's B files for its W on this stage (lab/weight_grad_store.hpp), in the compute
// dtype: every held linear's output gradient (the column-parallel ones 1/tp of their features; the head's the
// logits' gradient), new in B, and its input, an activation the store keeps past B — each distinct input once: the
// two norms' outputs, whole (gathered under SP), feed q/k/v and gate/up; attention's output feeds wo and the SwiGLU
// product w_down, 1/tp each; the final norm's output feeds the head.
struct WeightStoreBytes {
  int64_t gradients = 0, inputs = 0;
};
WeightStoreBytes weight_grad_store_bytes(const Config& config, int64_t blocks, bool head) {
  const ModelConfig& m = config.model;
  const int64_t t = std::max<int64_t>(1, config.parallel.tp), hd = m.d_model / m.n_heads;
  const int64_t gradients = (m.n_heads * hd + 2 * m.n_kv_heads * hd + 2 * m.ffn_hidden) / t + 2 * m.d_model;
  const int64_t inputs = 2 * m.d_model + (m.n_heads * hd + m.ffn_hidden) / t;
  const int64_t per_feature = config.train.micro_batch * m.seq_len *
                              bytes_of(dtype_named(config.precision.param_dtype, "precision.param_dtype"));
  return {.gradients = per_feature * (blocks * gradients + (head ? m.vocab_size / t : 0)),
          .inputs = per_feature * (blocks * inputs + (head ? m.d_model : 0))};
}

}  // namespace

MemoryPrediction pipeline_stage_memory(const dtlab::Config& config, const CostPlan& plan, const std::string& backend,
                                       int rank) {
  const int L = static_cast<int>(config.model.n_layers), P = static_cast<int>(config.parallel.pp);
  const std::vector<int> units = units_on_rank(config, rank);
  dtlab::Config stage = config;
  stage.parallel.pp = 1;
  stage.parallel.pp_virtual_stages = 1;
  stage.parallel.pp_split.clear();
  stage.model.n_layers = std::count_if(units.begin(), units.end(), [L](int m) { return m >= 1 && m <= L; });
  MemoryPrediction memory = predict_memory(stage, plan, backend);
  const PipeShape shape{.stages = P,
                        .micro_batches = static_cast<int>(std::max<int64_t>(1, config.train.accumulation)),
                        .virtual_stages = static_cast<int>(config.parallel.pp_virtual_stages)};
  const PipeSchedule schedule = parse_pipe_schedule(config.parallel.pp_schedule).value_or(PipeSchedule::one_f_one_b);
  const PipeTimes times =
      schedule == PipeSchedule::zero_bubble ? PipeTimes{.forward = 1, .backward = 1, .weight = 1} : PipeTimes{};
  const PipeReplay replay = replay_pipe_program(pipe_program(schedule, shape), shape, times);
  const auto pp_rank = static_cast<size_t>(rank / (config.world_size / P));
  const bool holds_head = std::find(units.begin(), units.end(), L + 1) != units.end();
  double in_flight = replay.peak_in_flight[pp_rank];
  if (schedule == PipeSchedule::zero_bubble) {
    // A micro-batch's activations go at the end of its B; what B files for W stays until W.
    const WeightStoreBytes store = weight_grad_store_bytes(config, stage.model.n_layers, holds_head);
    in_flight = peak_kept_bytes(replay, 1.0, 0.0)[pp_rank];
    memory.activations =
        std::llround(peak_kept_bytes(replay, static_cast<double>(memory.activations),
                                     static_cast<double>(store.gradients), static_cast<double>(store.inputs))[pp_rank]);
    memory.notes.push_back("zero bubble: each B files " + std::to_string(store.gradients) +
                           " bytes of output gradients for its W and keeps " + std::to_string(store.inputs) +
                           " bytes of the linears' inputs past its end (lab/weight_grad_store.hpp)");
  } else {
    memory.activations = std::llround(static_cast<double>(memory.activations) * in_flight);
  }
  memory.logits = holds_head ? std::llround(static_cast<double>(memory.logits) * in_flight) : 0;
  memory.peak = memory.params + memory.grads + memory.optimizer + memory.buffers + memory.activations + memory.logits +
                memory.comm_staging + memory.ring_scratch;
  memory.device_peak = memory.peak - memory.host;
  char line[200];
  std::snprintf(line, sizeof line,
                "pipeline stage: %lld blocks, activations x %.3g micro-batches in flight (%s), logits %s",
                static_cast<long long>(stage.model.n_layers), in_flight, pipe_schedule_name(schedule),
                holds_head ? "here (the head's stage)" : "on the last stage only");
  memory.notes.emplace_back(line);
  return memory;
}

StepPrediction predict_pipeline_step(const Config& config, const CostPlan& plan, const MachineProfile& profile,
                                     int rank) {
  StepPrediction s;
  const ComputeTime whole = compute_time(config, profile);  // one micro-batch through the whole model
  s.notes = whole.notes;
  const int P = static_cast<int>(config.parallel.pp), v = static_cast<int>(config.parallel.pp_virtual_stages);
  const int pp_rank = static_cast<int>(rank / (config.world_size / P));
  const PipeSchedule schedule = parse_pipe_schedule(config.parallel.pp_schedule).value_or(PipeSchedule::one_f_one_b);
  const PipeShape shape{.stages = P,
                        .micro_batches = static_cast<int>(std::max<int64_t>(1, config.train.accumulation)),
                        .virtual_stages = v};

  // Every call of the step, by op for comm.by_op; the sends' time is the transfer inside the replay, the rest runs
  // after the flush.
  OpRows rows;
  double transfer_ms = 0, after_flush_ms = 0;
  for (const PlannedCollective& c : plan.collectives) {
    if (c.phase == "setup") continue;
    PlannedCollective timed = c;
    if (c.op == "send") timed.op = "send_recv";  // one direction of a point-to-point exchange: α + Sβ
    const double ms = planned_collective_us(timed, config, profile) / 1e3;
    add_to_row(rows, c, ms, spans_nodes(timed, profile) ? "inter_node" : "intra_node");
    s.comm_ms += ms * static_cast<double>(c.count);
    if (c.op == "send")
      transfer_ms = std::max(transfer_ms, ms);
    else if (c.chunk < 0)  // else inside the chunks' actions (per_micro_batch_comm)
      after_flush_ms += ms * static_cast<double>(c.count);
  }
  s.by_op = row_list(rows);

  const bool split_weight = schedule == PipeSchedule::zero_bubble;
  std::vector<PipeTimes> times = stage_times(config, whole, split_weight, transfer_ms);
  const std::vector<PipeTimes> comm = per_micro_batch_comm(config, profile, split_weight);
  const PipeProgram program = pipe_program(schedule, shape);
  PipeReplay replay = replay_pipe_program_on_stages(program, shape, with_comm(times, comm));
  // Ranks that share oversubscribed cores compute faster while other stages idle: the blocks' times are those of
  // every rank computing, so they shrink by the speedup the stages' average busy share gives, and the schedule is
  // replayed on them (the share hardly moves: the transfers do not shrink).
  double busy_sum = 0;
  for (double b : replay.busy) busy_sum += b;
  const double busy_share = replay.makespan > 0 ? busy_sum / (P * replay.makespan) : 1.0;
  const double speedup = idle_sharers_speedup(config, profile, busy_share);
  if (speedup > 1.0) {
    for (PipeTimes& t : times) {
      t.forward /= speedup;
      t.backward /= speedup;
      t.weight /= speedup;
    }
    replay = replay_pipe_program_on_stages(program, shape, with_comm(times, comm));  // the calls do not shrink
    char shared[240];
    std::snprintf(shared, sizeof shared,
                  "the stages compute %.0f%% of the span on average and share oversubscribed cores: each block "
                  "runs x%.2f faster than with every rank computing at once",
                  100 * busy_share, speedup);
    s.notes.emplace_back(shared);
  }
  // This rank's calls inside its actions count as exposed communication, not compute.
  double in_actions_ms = 0;
  for (int c = 0; c < v; ++c) {
    const PipeTimes& t = comm[static_cast<size_t>(c * P + pp_rank)];
    in_actions_ms += (t.forward + t.backward + t.weight) * shape.micro_batches;
  }
  const double busy = replay.busy[static_cast<size_t>(pp_rank)];
  s.compute_ms = busy - in_actions_ms;
  s.exposed_comm_ms = (replay.makespan - busy) + in_actions_ms + after_flush_ms;
  s.optimizer_ms = elementwise_bytes(config, plan) / (profile.compute.memory_GBps * 1e9) * 1e3;
  s.step_ms = s.compute_ms + s.exposed_comm_ms + s.optimizer_ms;
  s.tokens_per_s = static_cast<double>(config.train.global_batch * config.model.seq_len) / (s.step_ms / 1e3);

  char note[320];
  std::snprintf(note, sizeof note,
                "pipeline step: %s replayed on per-stage times (first stage F %.2f ms, last stage F %.2f ms per "
                "micro-batch, transfer %.3f ms): span %.1f ms, this rank busy %.1f ms, bubble fraction %.3f",
                pipe_schedule_name(schedule), times.front().forward, times.back().forward, transfer_ms, replay.makespan,
                busy, replay.bubble_fraction());
  s.notes.emplace_back(note);
  if (in_actions_ms > 0) {
    std::snprintf(note, sizeof note,
                  "FSDP re-gathers per micro-batch (parallel.pp_reshard_after_forward): %.1f ms of this rank's "
                  "gathers and reduce-scatters run inside its F, B and W, counted unoverlapped (prefetch hides part)",
                  in_actions_ms);
    s.notes.emplace_back(note);
  }
  if (split_weight)
    s.notes.emplace_back(
        "zero bubble: W is the linears' weight-gradient GEMMs (from the inputs and output gradients B kept), B the "
        "rest of the backward; together one backward");
  return s;
}

}  // namespace dtlab::analysis
