// pipeline_schedule.hpp: pipeline-parallel schedules as data (torch-free) — for each rank of a pp group, the
// ordered actions of one optimizer step, and a replay of them on unit times that gives the bubble and the
// activations each rank keeps in flight.
//
//   const PipeShape shape{.stages = 4, .micro_batches = 8};
//   const PipeProgram program = pipe_program(PipeSchedule::one_f_one_b, shape);  // program[rank] = its actions
//   const PipeReplay replay = replay_pipe_program(program, shape, {.forward = 1, .backward = 2});
//   replay.bubble_fraction();                                                   // 3/8 = (P - 1) / m
//
// A rank holds v = virtual_stages model chunks; chunk c of rank r is virtual stage c·P + r of the P·v stages the
// blocks are cut into (Megatron-Core's interleaving; v = 1 otherwise). Each action names its op, chunk and
// micro-batch, and the ranks its activation (F) or gradient (B) comes from and goes to (-1: none, the first or the
// last stage). The schedules (a new one is one generator in pipeline_schedule.cpp):
//   gpipe             every forward, then every backward (Huang et al. 2019): m micro-batches in flight
//   1f1b              P - 1 - r forwards to warm up, then one forward and one backward in turn, then the remaining
//                     backwards (PipeDream-Flush, Narayanan et al. 2021): at most P - r in flight on rank r
//   interleaved_1f1b  1f1b over v chunks per rank, micro-batches in groups of P per chunk (Narayanan et al. 2021
//                     §2.2; needs m % P == 0): the bubble shrinks by v
//   zero_bubble       ZB-H1 (Qi et al. 2023): 1f1b's order with each backward split into B (the input gradient,
//                     which the previous stage waits for) and W (the weight gradient, which nobody waits for); a
//                     rank runs a pending W whenever its next F or B would wait, so W fills the bubbles
// Bubble fractions (idle over busy time, summed over ranks) on uniform stages without transfer time: (P - 1)/m for
// gpipe and 1f1b, (P - 1)/(v·m) for interleaved_1f1b, (P - 1)(F + B - W)/(m(F + B + W)) for zero_bubble.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtlab {

enum class PipeSchedule { gpipe, one_f_one_b, interleaved_1f1b, zero_bubble };
std::optional<PipeSchedule> parse_pipe_schedule(
    std::string_view name);  // gpipe | 1f1b | interleaved_1f1b | zero_bubble
const char* pipe_schedule_name(PipeSchedule schedule);
inline constexpr const char* kPipeScheduleNames = "gpipe | 1f1b | interleaved_1f1b | zero_bubble";

// F: forward of one micro-batch through one chunk; B: its backward (the input gradient, and the weight gradient
// too unless the schedule splits it off as W).
enum class PipeOp { forward, backward, weight };
char pipe_op_letter(PipeOp op);  // F | B | W

struct PipeAction {
  PipeOp op = PipeOp::forward;
  int chunk = 0;        // this rank's model chunk, 0..v-1
  int micro_batch = 0;  // 0..m-1
  int recv_from = -1;   // the rank whose activation (F) or gradient (B) this action waits for; -1: none
  int send_to = -1;     // the rank this action's output goes to; -1: none
};

struct PipeShape {
  int stages = 1;          // P, the pp group's ranks
  int micro_batches = 1;   // m per optimizer step (per data-parallel rank)
  int virtual_stages = 1;  // v, model chunks per rank (interleaved_1f1b only)
};

using PipeProgram = std::vector<std::vector<PipeAction>>;  // per rank of the pp group, in execution order

// The actions of `schedule` for `shape`. Throws std::invalid_argument naming the rule: P, m >= 1; v > 1 only for
// (and v >= 2 required by) interleaved_1f1b, which also needs m % P == 0; 1f1b, interleaved_1f1b and zero_bubble need
// m >= P (fewer micro-batches than stages leave the warm-up unfilled; use gpipe).
PipeProgram pipe_program(PipeSchedule schedule, const PipeShape& shape);

// Times of one action on one chunk (any unit), and of one transfer between ranks.
struct PipeTimes {
  double forward = 1.0, backward = 2.0, weight = 0.0;  // backward excludes weight when the schedule splits W off
  double transfer = 0.0;
};

struct PipeSpan {
  PipeAction action;
  double start = 0, end = 0;
};

struct PipeReplay {
  std::vector<std::vector<PipeSpan>> ranks;  // per rank, in execution order
  double makespan = 0;                       // the step: from the first action's start to the last one's end
  std::vector<double> busy;                  // per rank: the sum of its actions' times
  // Per rank, the most micro-batch chunks whose forward has run and whose activations are still kept (until B, or
  // W when the schedule splits it off), divided by v: micro-batch equivalents of one rank's activations.
  std::vector<double> peak_in_flight;
  double bubble_fraction() const;  // Σ (makespan - busy) / Σ busy over the ranks
};

// Runs `program` in order on every rank, each action as soon as the rank is free and its inputs have arrived (an F
// waits for the previous virtual stage's F of that micro-batch plus a transfer; a B for its own F and the next
// stage's B plus a transfer; a W for its B). Throws std::logic_error naming a waiting action when the program
// deadlocks, and when an action is missing or repeated.
PipeReplay replay_pipe_program(const PipeProgram& program, const PipeShape& shape, const PipeTimes& times);
// The same with each virtual stage's own times (stage_times[k], k = chunk·P + rank; P·v of them): stages of unequal
// work, e.g. the embedding's and the head's. A transfer takes the sending stage's time.
PipeReplay replay_pipe_program_on_stages(const PipeProgram& program, const PipeShape& shape,
                                         const std::vector<PipeTimes>& stage_times);

// Per rank, the most bytes kept at once when each micro-batch chunk keeps `activation` bytes from its F to the end
// of its B and, where the schedule splits W off, what B files for W (lab/weight_grad_store.hpp) until its W:
// `weight_store` bytes of new tensors (the output gradients) from the start of B, and `store_inputs` bytes of its
// own activations (the linears' inputs) that stay past the end of B. A B's activations and its new store are live
// together while it runs (the runtime retains the chunk's graph through B).
std::vector<double> peak_kept_bytes(const PipeReplay& replay, double activation, double weight_store,
                                    double store_inputs = 0);

// The bubble fraction the formulas above give for `schedule` (uniform stages, no transfer time).
double predicted_bubble_fraction(PipeSchedule schedule, const PipeShape& shape, const PipeTimes& times);

}  // namespace dtlab
