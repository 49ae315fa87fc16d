// cmd_pp_schedule.cpp: `dtlab pp-schedule --pp P --microbatches M --schedule S [--virtual V] [--times F,B,W]` —
// a pipeline schedule's actions per rank as a time grid, its replayed bubble beside the formula's, and the
// activations each rank keeps in flight, without training (lab/pipeline_schedule.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lab/cli/command.hpp"
#include "lab/config.hpp"
#include "lab/pipeline_schedule.hpp"

namespace dtlab::cli {
namespace {

struct PpScheduleArgs {
  int stages = 4, micro_batches = 8, virtual_stages = 1;
  std::string schedule = "1f1b", times;
};

// "F,B[,W]" -> PipeTimes; zero_bubble's default splits the backward in two equal halves.
PipeTimes parse_times(const std::string& text, PipeSchedule schedule) {
  PipeTimes t;
  if (schedule == PipeSchedule::zero_bubble) t = {.forward = 1, .backward = 1, .weight = 1};
  if (text.empty()) return t;
  std::vector<double> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      size_t used = 0;
      values.push_back(std::stod(item, &used));
      if (used != item.size() || values.back() < 0) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw ConfigError("pp-schedule --times: '" + item + "' is not a time >= 0 (expected F,B or F,B,W)");
    }
  }
  if (values.size() < 2 || values.size() > 3 || values[0] <= 0 || values[1] <= 0)
    throw ConfigError("pp-schedule --times=" + text + ": expected F,B or F,B,W with F and B > 0");
  t.forward = values[0], t.backward = values[1], t.weight = values.size() == 3 ? values[2] : 0.0;
  if (schedule == PipeSchedule::zero_bubble && t.weight <= 0)
    throw ConfigError("pp-schedule --times=" + text + ": zero_bubble splits the backward into B and W; give W > 0");
  if (schedule != PipeSchedule::zero_bubble && t.weight > 0)
    throw ConfigError("pp-schedule --times=" + text + ": only zero_bubble splits off W; give F,B");
  return t;
}

std::string label(const PipeAction& a, int virtual_stages) {
  std::string s(1, pipe_op_letter(a.op));
  s += std::to_string(a.micro_batch);
  if (virtual_stages > 1) s += "." + std::to_string(a.chunk);
  return s;
}

// One row per rank, one column per `unit` of time: an action's label in its first column, '-' in the rest.
void print_grid(const PipeReplay& replay, int virtual_stages, double unit) {
  size_t width = 2;
  for (const auto& spans : replay.ranks)
    for (const PipeSpan& s : spans) width = std::max(width, label(s.action, virtual_stages).size());
  const auto columns = static_cast<size_t>(std::lround(replay.makespan / unit));
  for (size_t r = 0; r < replay.ranks.size(); ++r) {
    std::vector<std::string> cells(columns, std::string(width, '.'));
    for (const PipeSpan& s : replay.ranks[r]) {
      const auto first = static_cast<size_t>(std::lround(s.start / unit));
      const auto last = static_cast<size_t>(std::lround(s.end / unit));
      for (size_t c = first; c < last && c < columns; ++c) cells[c] = std::string(width, '-');
      if (first < columns) {
        std::string text = label(s.action, virtual_stages);
        cells[first] = text + std::string(width - text.size(), ' ');
      }
    }
    std::printf("rank %zu |", r);
    for (const std::string& cell : cells) std::printf(" %s", cell.c_str());
    std::printf("\n");
  }
}

int run_pp_schedule(const PpScheduleArgs& a) {
  const std::optional<PipeSchedule> schedule = parse_pipe_schedule(a.schedule);
  if (!schedule) throw ConfigError("pp-schedule --schedule=" + a.schedule + " is not one of " + kPipeScheduleNames);
  const PipeShape shape{.stages = a.stages, .micro_batches = a.micro_batches, .virtual_stages = a.virtual_stages};
  const PipeTimes times = parse_times(a.times, *schedule);
  PipeProgram program;
  try {
    program = pipe_program(*schedule, shape);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("pp-schedule: ") + e.what());
  }
  const PipeReplay replay = replay_pipe_program(program, shape, times);
  std::printf("%s: %d stages, %d micro-batches, %d chunk(s) per rank; per chunk F %g, B %g", a.schedule.c_str(),
              a.stages, a.micro_batches, a.virtual_stages, times.forward, times.backward);
  if (times.weight > 0) std::printf(", W %g", times.weight);
  double unit = std::min(times.forward, times.backward);
  if (times.weight > 0) unit = std::min(unit, times.weight);
  std::printf(" (one column per %g; '-' the rest of an action, '.' idle)\n", unit);
  print_grid(replay, a.virtual_stages, unit);
  std::printf("step %g; bubble %.1f%% of the busy time replayed, %.1f%% by the formula", replay.makespan,
              100.0 * replay.bubble_fraction(), 100.0 * predicted_bubble_fraction(*schedule, shape, times));
  switch (*schedule) {
    case PipeSchedule::gpipe:
    case PipeSchedule::one_f_one_b:
      std::printf(" (P - 1)/m\n");
      break;
    case PipeSchedule::interleaved_1f1b:
      std::printf(" (P - 1)/(v·m)\n");
      break;
    case PipeSchedule::zero_bubble:
      std::printf(" (P - 1)(F + B - W)/(m(F + B + W))\n");
      break;
  }
  std::printf("activations in flight per rank, in micro-batches:");
  for (double peak : replay.peak_in_flight) std::printf(" %g", peak);
  std::printf("\n");
  return 0;
}

}  // namespace

Command add_pp_schedule_command(CLI::App& app) {
  auto args = std::make_shared<PpScheduleArgs>();
  auto* cmd = app.add_subcommand("pp-schedule", "print a pipeline schedule's grid, bubble and in-flight activations");
  cmd->add_option("--pp", args->stages, "pipeline stages (ranks of the pp group)")->check(CLI::PositiveNumber);
  cmd->add_option("--microbatches", args->micro_batches, "micro-batches per step")->check(CLI::PositiveNumber);
  cmd->add_option("--schedule", args->schedule, kPipeScheduleNames);
  cmd->add_option("--virtual", args->virtual_stages, "model chunks per rank (interleaved_1f1b)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--times", args->times, "F,B[,W]: one chunk's forward, backward and weight-gradient times");
  cmd->footer("example: dtlab pp-schedule --pp 4 --microbatches 8 --schedule interleaved_1f1b --virtual 2");
  return {cmd, [args] { return run_pp_schedule(*args); }};
}

}  // namespace dtlab::cli
