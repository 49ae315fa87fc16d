// pipeline_schedule.cpp: the schedules' generators and the replay (see pipeline_schedule.hpp).
#include "lab/pipeline_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace dtlab {
namespace {

std::string n(int x) { return std::to_string(x); }

// The action of `op` on `chunk` of `rank` for micro-batch `mb`, with the ranks it receives from and sends to.
PipeAction make_action(PipeOp op, int rank, int chunk, int mb, const PipeShape& shape) {
  const int P = shape.stages, K = P * shape.virtual_stages, k = chunk * P + rank;
  const auto rank_of = [P](int stage) { return stage % P; };
  PipeAction a{op, chunk, mb};
  if (op == PipeOp::forward) {
    a.recv_from = k > 0 ? rank_of(k - 1) : -1;
    a.send_to = k < K - 1 ? rank_of(k + 1) : -1;
  } else if (op == PipeOp::backward) {
    a.recv_from = k < K - 1 ? rank_of(k + 1) : -1;
    a.send_to = k > 0 ? rank_of(k - 1) : -1;
  }
  return a;
}

std::vector<PipeAction> gpipe_rank(int rank, const PipeShape& shape) {
  std::vector<PipeAction> out;
  for (int mb = 0; mb < shape.micro_batches; ++mb) out.push_back(make_action(PipeOp::forward, rank, 0, mb, shape));
  for (int mb = 0; mb < shape.micro_batches; ++mb) out.push_back(make_action(PipeOp::backward, rank, 0, mb, shape));
  return out;
}

// 1F1B over v chunks: the k-th forward and the k-th backward of a rank, in Megatron-Core's interleaved order
// (groups of P micro-batches per chunk; backwards from the last chunk); v = 1 is plain 1F1B.
std::vector<PipeAction> one_f_one_b_rank(int rank, const PipeShape& shape) {
  const int P = shape.stages, v = shape.virtual_stages, total = shape.micro_batches * v;
  const auto micro_batch = [&](int k) { return k / (P * v) * P + k % P; };
  const auto forward = [&](int k) { return make_action(PipeOp::forward, rank, k / P % v, micro_batch(k), shape); };
  const auto backward = [&](int k) {
    return make_action(PipeOp::backward, rank, v - 1 - k / P % v, micro_batch(k), shape);
  };
  const int warmup = std::min(v == 1 ? P - 1 - rank : (P - rank - 1) * 2 + (v - 1) * P, total);
  std::vector<PipeAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(forward(k));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(forward(warmup + i));
    out.push_back(backward(i));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(backward(k));
  return out;
}

using StageKey = std::tuple<int, int, PipeOp>;  // virtual stage, micro-batch, op

// The time an action's inputs are ready, or nullopt while one of them has not run yet.
std::optional<double> ready_time(const PipeAction& a, int rank, const PipeShape& shape,
                                 const std::vector<PipeTimes>& stage_times, const std::map<StageKey, double>& ends) {
  const int P = shape.stages, k = a.chunk * P + rank;
  double ready = 0;
  const auto need = [&](int stage, PipeOp op, bool crosses) -> bool {
    auto it = ends.find({stage, a.micro_batch, op});
    if (it == ends.end()) return false;
    ready = std::max(ready, it->second + (crosses ? stage_times[static_cast<size_t>(stage)].transfer : 0.0));
    return true;
  };
  switch (a.op) {
    case PipeOp::forward:
      if (a.recv_from >= 0 && !need(k - 1, PipeOp::forward, a.recv_from != rank)) return std::nullopt;
      break;
    case PipeOp::backward:
      if (!need(k, PipeOp::forward, false)) return std::nullopt;
      if (a.recv_from >= 0 && !need(k + 1, PipeOp::backward, a.recv_from != rank)) return std::nullopt;
      break;
    case PipeOp::weight:
      if (!need(k, PipeOp::backward, false)) return std::nullopt;
      break;
  }
  return ready;
}

double duration(PipeOp op, const PipeTimes& t) {
  return op == PipeOp::forward ? t.forward : op == PipeOp::backward ? t.backward : t.weight;
}

// ZB-H1: each rank follows 1F1B's order of F and B (B the input gradient only) and runs its oldest pending W
// whenever its next F or B would otherwise wait, or when its next F would hold more micro-batches than 1F1B's peak
// (P, on the first stage: a micro-batch's inputs are kept until its W; the later stages spend the memory 1F1B
// leaves them on deferred Ws), and the rest at the end. Built by list scheduling on equal F, B and W times, the
// times the schedule is designed for: the rank whose next action can start earliest goes first.
PipeProgram zero_bubble_program(const PipeShape& shape) {
  const int P = shape.stages;
  const PipeTimes unit{.forward = 1, .backward = 1, .weight = 1};
  const std::vector<PipeTimes> unit_stages(static_cast<size_t>(P), unit);  // zero bubble runs one chunk per rank
  std::vector<std::vector<PipeAction>> base(static_cast<size_t>(P)), pending(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) base[static_cast<size_t>(r)] = one_f_one_b_rank(r, shape);
  PipeProgram program(static_cast<size_t>(P));
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  std::vector<double> free_at(static_cast<size_t>(P), 0.0);
  std::vector<int> in_flight(static_cast<size_t>(P), 0);  // forwards whose W has not run
  std::map<StageKey, double> ends;
  const auto run = [&](int r, const PipeAction& a, double start) {
    in_flight[static_cast<size_t>(r)] += a.op == PipeOp::forward ? 1 : a.op == PipeOp::weight ? -1 : 0;
    const double end = start + duration(a.op, unit);
    ends[{a.chunk * P + r, a.micro_batch, a.op}] = end;
    free_at[static_cast<size_t>(r)] = end;
    program[static_cast<size_t>(r)].push_back(a);
    if (a.op == PipeOp::backward)
      pending[static_cast<size_t>(r)].push_back(make_action(PipeOp::weight, r, a.chunk, a.micro_batch, shape));
  };
  for (;;) {
    int best_rank = -1;
    bool best_is_weight = false;
    double best_start = 0;
    for (int r = 0; r < P; ++r) {
      const auto ru = static_cast<size_t>(r);
      const double now = free_at[ru];
      std::optional<double> start;
      const bool memory_full =
          next[ru] < base[ru].size() && base[ru][next[ru]].op == PipeOp::forward && in_flight[ru] >= P;
      if (next[ru] < base[ru].size() && !memory_full)
        if (const auto ready = ready_time(base[ru][next[ru]], r, shape, unit_stages, ends))
          start = std::max(now, *ready);
      // F/B would wait, or F would hold one micro-batch too many: run a W first.
      const bool weight = !pending[ru].empty() && (!start || *start > now);
      if (weight) start = now;
      if (!start) continue;
      if (best_rank < 0 || *start < best_start || (*start == best_start && best_is_weight && !weight)) {
        best_rank = r, best_start = *start, best_is_weight = weight;
      }
    }
    if (best_rank < 0) break;
    const auto ru = static_cast<size_t>(best_rank);
    if (best_is_weight) {
      const PipeAction w = pending[ru].front();
      pending[ru].erase(pending[ru].begin());
      run(best_rank, w, best_start);
    } else {
      run(best_rank, base[ru][next[ru]++], best_start);
    }
  }
  for (int r = 0; r < P; ++r)
    if (next[static_cast<size_t>(r)] < base[static_cast<size_t>(r)].size())
      throw std::logic_error("zero_bubble: rank " + n(r) + " could not place all of its forwards and backwards");
  return program;
}

}  // namespace

std::optional<PipeSchedule> parse_pipe_schedule(std::string_view name) {
  if (name == "gpipe") return PipeSchedule::gpipe;
  if (name == "1f1b") return PipeSchedule::one_f_one_b;
  if (name == "interleaved_1f1b") return PipeSchedule::interleaved_1f1b;
  if (name == "zero_bubble") return PipeSchedule::zero_bubble;
  return std::nullopt;
}

const char* pipe_schedule_name(PipeSchedule schedule) {
  switch (schedule) {
    case PipeSchedule::gpipe:
      return "gpipe";
    case PipeSchedule::one_f_one_b:
      return "1f1b";
    case PipeSchedule::interleaved_1f1b:
      return "interleaved_1f1b";
    case PipeSchedule::zero_bubble:
      return "zero_bubble";
  }
  return "?";
}

char pipe_op_letter(PipeOp op) { return op == PipeOp::forward ? 'F' : op == PipeOp::backward ? 'B' : 'W'; }

PipeProgram pipe_program(PipeSchedule schedule, const PipeShape& shape) {
  const std::string name = pipe_schedule_name(schedule);
  const int P = shape.stages, m = shape.micro_batches, v = shape.virtual_stages;
  if (P < 1 || m < 1 || v < 1)
    throw std::invalid_argument(name + ": stages (" + n(P) + "), micro-batches (" + n(m) + ") and virtual stages (" +
                                n(v) + ") must be at least 1");
  if (schedule == PipeSchedule::interleaved_1f1b) {
    if (v < 2)
      throw std::invalid_argument(name + " needs at least 2 virtual stages per rank (got " + n(v) +
                                  "); with one chunk per rank use 1f1b");
    if (m % P != 0)
      throw std::invalid_argument(name + " needs the micro-batches (" + n(m) + ") to be a multiple of the stages (" +
                                  n(P) + "): each chunk runs them in groups of " + n(P));
  } else if (v != 1) {
    throw std::invalid_argument(name + " runs one chunk per rank (virtual stages " + n(v) +
                                "); only interleaved_1f1b interleaves chunks");
  }
  if (schedule != PipeSchedule::gpipe && m < P)
    throw std::invalid_argument(name + " needs at least as many micro-batches as stages (" + n(m) + " < " + n(P) +
                                "): fewer leave the warm-up unfilled; raise the micro-batches or use gpipe");
  if (schedule == PipeSchedule::zero_bubble) return zero_bubble_program(shape);
  PipeProgram program;
  for (int r = 0; r < P; ++r)
    program.push_back(schedule == PipeSchedule::gpipe ? gpipe_rank(r, shape) : one_f_one_b_rank(r, shape));
  return program;
}

double PipeReplay::bubble_fraction() const {
  double idle = 0, work = 0;
  for (double b : busy) {
    idle += makespan - b;
    work += b;
  }
  return work > 0 ? idle / work : 0.0;
}

PipeReplay replay_pipe_program(const PipeProgram& program, const PipeShape& shape, const PipeTimes& times) {
  return replay_pipe_program_on_stages(
      program, shape, std::vector<PipeTimes>(static_cast<size_t>(shape.stages * shape.virtual_stages), times));
}

PipeReplay replay_pipe_program_on_stages(const PipeProgram& program, const PipeShape& shape,
                                         const std::vector<PipeTimes>& stage_times) {
  const int P = shape.stages;
  if (static_cast<int>(stage_times.size()) != P * shape.virtual_stages)
    throw std::logic_error("pipeline replay: " + n(static_cast<int>(stage_times.size())) + " stage times for " +
                           n(P * shape.virtual_stages) + " virtual stages");
  if (static_cast<int>(program.size()) != P)
    throw std::logic_error("pipeline replay: " + n(static_cast<int>(program.size())) + " ranks' actions for " + n(P) +
                           " stages");
  bool splits_weight = false;
  std::map<StageKey, int> seen;
  for (int r = 0; r < P; ++r)
    for (const PipeAction& a : program[static_cast<size_t>(r)]) {
      splits_weight = splits_weight || a.op == PipeOp::weight;
      if (++seen[{a.chunk * P + r, a.micro_batch, a.op}] > 1)
        throw std::logic_error("pipeline replay: rank " + n(r) + " runs " + pipe_op_letter(a.op) + " of chunk " +
                               n(a.chunk) + ", micro-batch " + n(a.micro_batch) + " twice");
    }
  const int K = P * shape.virtual_stages;
  for (int k = 0; k < K; ++k)
    for (int mb = 0; mb < shape.micro_batches; ++mb)
      for (PipeOp op : {PipeOp::forward, PipeOp::backward, PipeOp::weight})
        if ((op != PipeOp::weight || splits_weight) && seen.count({k, mb, op}) == 0)
          throw std::logic_error("pipeline replay: no " + std::string(1, pipe_op_letter(op)) + " of micro-batch " +
                                 n(mb) + " on virtual stage " + n(k) + " (rank " + n(k % P) + ")");

  PipeReplay replay;
  replay.ranks.resize(static_cast<size_t>(P));
  replay.busy.assign(static_cast<size_t>(P), 0.0);
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  std::vector<double> free_at(static_cast<size_t>(P), 0.0);
  std::map<StageKey, double> ends;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      const auto ru = static_cast<size_t>(r);
      while (next[ru] < program[ru].size()) {
        const PipeAction& a = program[ru][next[ru]];
        const std::optional<double> ready = ready_time(a, r, shape, stage_times, ends);
        if (!ready) break;
        const PipeTimes& t = stage_times[static_cast<size_t>(a.chunk * P + r)];
        const double start = std::max(free_at[ru], *ready), end = start + duration(a.op, t);
        ends[{a.chunk * P + r, a.micro_batch, a.op}] = end;
        replay.ranks[ru].push_back({a, start, end});
        replay.busy[ru] += end - start;
        free_at[ru] = end;
        replay.makespan = std::max(replay.makespan, end);
        ++next[ru];
        progress = true;
      }
    }
  }
  std::string stuck;  // every rank that cannot go on, and the action it waits at
  for (int r = 0; r < P; ++r) {
    const auto ru = static_cast<size_t>(r);
    if (next[ru] == program[ru].size()) continue;
    const PipeAction& a = program[ru][next[ru]];
    stuck += (stuck.empty() ? "" : "; ") + std::string("rank ") + n(r) + " waits forever at " + pipe_op_letter(a.op) +
             " of chunk " + n(a.chunk) + ", micro-batch " + n(a.micro_batch);
  }
  if (!stuck.empty()) throw std::logic_error("pipeline replay: the program deadlocks: " + stuck);
  // Activations kept: from a chunk's forward to its backward (its weight gradient when split off).
  const PipeOp frees = splits_weight ? PipeOp::weight : PipeOp::backward;
  for (const auto& spans : replay.ranks) {
    int in_flight = 0, peak = 0;
    for (const PipeSpan& s : spans) {
      if (s.action.op == PipeOp::forward) peak = std::max(peak, ++in_flight);
      if (s.action.op == frees) --in_flight;
    }
    replay.peak_in_flight.push_back(static_cast<double>(peak) / shape.virtual_stages);
  }
  return replay;
}

std::vector<double> peak_kept_bytes(const PipeReplay& replay, double activation, double weight_store,
                                    double store_inputs) {
  std::vector<double> out;
  for (const auto& spans : replay.ranks) {
    const bool splits =
        std::any_of(spans.begin(), spans.end(), [](const PipeSpan& s) { return s.action.op == PipeOp::weight; });
    double kept = 0, peak = 0;
    for (const PipeSpan& s : spans) {
      if (s.action.op == PipeOp::forward) kept += activation;
      if (s.action.op == PipeOp::backward && splits) kept += weight_store;
      peak = std::max(peak, kept);
      if (s.action.op == PipeOp::backward) kept -= activation - (splits ? store_inputs : 0);
      if (s.action.op == PipeOp::weight) kept -= weight_store + store_inputs;
    }
    out.push_back(peak);
  }
  return out;
}

double predicted_bubble_fraction(PipeSchedule schedule, const PipeShape& shape, const PipeTimes& times) {
  const double P = shape.stages, m = shape.micro_batches, v = shape.virtual_stages;
  switch (schedule) {
    case PipeSchedule::gpipe:
    case PipeSchedule::one_f_one_b:
      return (P - 1) / m;
    case PipeSchedule::interleaved_1f1b:
      return (P - 1) / (v * m);
    case PipeSchedule::zero_bubble: {
      const double F = times.forward, B = times.backward, W = times.weight;
      return (P - 1) * std::max(0.0, F + B - W) / (m * (F + B + W));
    }
  }
  return 0.0;
}

}  // namespace dtlab
