// report_pipeline_grid.cpp: the pipeline part's step grid (torch-free). For each schedule at the study's deepest
// pipeline and most micro-batches, one step as it ran — every stage's F, B and W blocks from rank<r>/timeline.json —
// above the schedule's planned grid: lab/pipeline_schedule.hpp's program replayed on that run's own median F, B and W
// times per stage with free transfers. Both on one time axis, so what the schedule costs by its order (the planned
// idle) and what the run adds to it (transfers, waits, uneven blocks) read apart.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "analysis/results_instrument.hpp"
#include "analysis/svg_util.hpp"
#include "lab/pipeline_schedule.hpp"
#include "lab/stats.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;

struct GridBlock {
  int rank = 0;
  PipeOp op = PipeOp::forward;
  int chunk = 0, micro_batch = 0;
  double start_ms = 0, end_ms = 0;
};

struct GridRun {
  const RunResult* run = nullptr;
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  PipeShape shape;
  std::vector<GridBlock> measured, planned;  // planned starts where the run's first block started
  double measured_ms = 0, planned_ms = 0;    // first block's start to last block's end
};

// "forward-compute F c1.3" -> F, chunk 1, micro-batch 3 (the trainer's names, lab/train/pipeline_step.cpp).
std::optional<GridBlock> block_of(const TimelineSpan& s, int rank) {
  if (s.lane != "compute") return std::nullopt;
  const size_t space = s.name.find(' ');
  if (space == std::string::npos) return std::nullopt;
  char letter = 0;
  GridBlock b;
  if (std::sscanf(s.name.c_str() + space + 1, "%c c%d.%d", &letter, &b.chunk, &b.micro_batch) != 3) return std::nullopt;
  if (letter == 'F')
    b.op = PipeOp::forward;
  else if (letter == 'B')
    b.op = PipeOp::backward;
  else if (letter == 'W')
    b.op = PipeOp::weight;
  else
    return std::nullopt;
  b.rank = rank;
  b.start_ms = s.start_us / 1000.0;
  b.end_ms = s.end_us / 1000.0;
  return b;
}

// The run's blocks, or nullopt when a stage's timeline is missing or unreadable (the section's timeline figure
// reports the file) or holds no F block.
std::optional<std::vector<GridBlock>> measured_blocks(const RunResult& r, int stages) {
  std::vector<GridBlock> blocks;
  for (int rank = 0; rank < stages; ++rank) {
    const fs::path file = fs::path(r.dir) / ("rank" + std::to_string(rank)) / "timeline.json";
    if (!fs::is_regular_file(file)) return std::nullopt;
    try {
      const RankTimeline t = parse_timeline(read_instrument_json(file), rank, file.string());
      size_t before = blocks.size();
      for (const TimelineSpan& s : t.spans)
        if (const auto b = block_of(s, rank)) blocks.push_back(*b);
      if (blocks.size() == before) return std::nullopt;
    } catch (const AnalysisError&) {
      return std::nullopt;
    }
  }
  return blocks;
}

// Each virtual stage's median F, B and W times (k = chunk·P + rank, as pipeline_schedule.hpp numbers them).
std::vector<PipeTimes> stage_times(const std::vector<GridBlock>& blocks, const PipeShape& shape) {
  std::map<std::tuple<int, int, PipeOp>, std::vector<double>> durations;
  for (const GridBlock& b : blocks) durations[{b.rank, b.chunk, b.op}].push_back(b.end_ms - b.start_ms);
  std::vector<PipeTimes> times(static_cast<size_t>(shape.stages * shape.virtual_stages));
  for (int chunk = 0; chunk < shape.virtual_stages; ++chunk)
    for (int rank = 0; rank < shape.stages; ++rank) {
      PipeTimes& t = times[static_cast<size_t>(chunk * shape.stages + rank)];
      t.forward = median_or_zero(durations[{rank, chunk, PipeOp::forward}]);
      t.backward = median_or_zero(durations[{rank, chunk, PipeOp::backward}]);
      t.weight = median_or_zero(durations[{rank, chunk, PipeOp::weight}]);
      t.transfer = 0;
    }
  return times;
}

std::pair<double, double> extent(const std::vector<GridBlock>& blocks) {
  double lo = blocks.front().start_ms, hi = blocks.front().end_ms;
  for (const GridBlock& b : blocks) lo = std::min(lo, b.start_ms), hi = std::max(hi, b.end_ms);
  return {lo, hi};
}

std::optional<GridRun> grid_run(const RunResult& r, int stages) {
  GridRun g;
  g.run = &r;
  const nlohmann::json parallel = r.config.value("parallel", nlohmann::json::object());
  g.schedule = parse_pipe_schedule(parallel.value("pp_schedule", "1f1b")).value_or(PipeSchedule::one_f_one_b);
  g.shape = {
      .stages = stages,
      .micro_batches = static_cast<int>(json_number_at(r.config, {"train", "accumulation"}).value_or(1)),
      .virtual_stages = static_cast<int>(json_number_at(r.config, {"parallel", "pp_virtual_stages"}).value_or(1))};
  std::optional<std::vector<GridBlock>> blocks = measured_blocks(r, stages);
  if (!blocks) return std::nullopt;
  g.measured = std::move(*blocks);
  const auto [first, last] = extent(g.measured);
  g.measured_ms = last - first;
  try {
    const PipeReplay replay =
        replay_pipe_program_on_stages(pipe_program(g.schedule, g.shape), g.shape, stage_times(g.measured, g.shape));
    for (int rank = 0; rank < stages; ++rank)
      for (const PipeSpan& s : replay.ranks[static_cast<size_t>(rank)])
        g.planned.push_back({.rank = rank,
                             .op = s.action.op,
                             .chunk = s.action.chunk,
                             .micro_batch = s.action.micro_batch,
                             .start_ms = first + s.start,
                             .end_ms = first + s.end});
    g.planned_ms = replay.makespan;
  } catch (const std::exception&) {
    return std::nullopt;  // a shape the schedule refuses, or blocks missing from the timeline
  }
  return g;
}

const char* op_colour(PipeOp op) {
  switch (op) {
    case PipeOp::forward:
      return "#4e79a7";
    case PipeOp::backward:
      return "#f28e2b";
    case PipeOp::weight:
      return "#59a14f";
  }
  return "#bab0ac";
}

std::string schedule_label(const GridRun& g) {
  std::string s = pipe_schedule_name(g.schedule);
  if (g.shape.virtual_stages > 1) s += " (v " + std::to_string(g.shape.virtual_stages) + ")";
  return s;
}

constexpr double kWidth = 880, kLabelW = 130, kRight = 20, kRowH = 13, kRowGap = 2, kRankGap = 6;
constexpr double kHead = 22, kPanelGap = 10, kLegendH = 28, kAxisH = 30;

void draw_blocks(std::ostream& svg, const std::vector<GridBlock>& blocks, int rank, double y, bool planned,
                 const std::function<double(double)>& x_of, int virtual_stages) {
  for (const GridBlock& b : blocks) {
    if (b.rank != rank) continue;
    const double x0 = x_of(b.start_ms), w = std::max(0.8, x_of(b.end_ms) - x0);
    const std::string label =
        (virtual_stages > 1 ? std::to_string(b.chunk) + "." : std::string()) + std::to_string(b.micro_batch);
    const std::string tip = std::string(1, pipe_op_letter(b.op)) + " chunk " + std::to_string(b.chunk) +
                            " micro-batch " + std::to_string(b.micro_batch) + (planned ? " (planned)" : "") + ": " +
                            fmt_fixed(b.start_ms, 1) + "–" + fmt_fixed(b.end_ms, 1) + " ms";
    svg << "<rect x=\"" << fmt_svg(x0) << "\" y=\"" << fmt_svg(y) << "\" width=\"" << fmt_svg(w) << "\" height=\""
        << fmt_svg(kRowH) << "\" fill=\"" << op_colour(b.op) << "\"" << (planned ? " fill-opacity=\"0.55\"" : "")
        << " stroke=\"white\" stroke-width=\"0.5\"><title>" << html_escape(tip) << "</title></rect>";
    if (w > 7.0 * static_cast<double>(label.size()) + 4)
      svg << "<text x=\"" << fmt_svg(x0 + w / 2) << "\" y=\"" << fmt_svg(y + 10)
          << "\" text-anchor=\"middle\" fill=\"white\" font-size=\"9\" pointer-events=\"none\">" << label << "</text>";
    svg << "\n";
  }
}

std::string grid_svg(const std::vector<GridRun>& runs, double& height) {
  double t_max = 0;
  for (const GridRun& g : runs) {
    t_max = std::max(t_max, extent(g.measured).second);
    t_max = std::max(t_max, extent(g.planned).second);
  }
  const double tick = nice_step(std::max(t_max, 1.0), 8);
  t_max = std::ceil(t_max / tick) * tick;
  const double plot_x = kLabelW, plot_w = kWidth - kLabelW - kRight;
  const auto x_of = [&](double ms) { return plot_x + std::clamp(ms, 0.0, t_max) / t_max * plot_w; };
  double bottom = kLegendH;
  for (const GridRun& g : runs) bottom += kHead + g.shape.stages * (2 * (kRowH + kRowGap) + kRankGap) + kPanelGap;
  height = bottom + kAxisH;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << fmt_svg(kWidth) << ' ' << fmt_svg(height)
      << "\" width=\"" << fmt_svg(kWidth) << "\" height=\"" << fmt_svg(height)
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\" role=\"img\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  double lx = plot_x;
  for (const auto& [op, label] : {std::pair{PipeOp::forward, "F forward"}, std::pair{PipeOp::backward, "B backward"},
                                  std::pair{PipeOp::weight, "W weight gradient"}}) {
    svg << "<rect x=\"" << fmt_svg(lx) << "\" y=\"8\" width=\"12\" height=\"12\" fill=\"" << op_colour(op)
        << "\"/><text x=\"" << fmt_svg(lx + 16) << "\" y=\"18\" fill=\"#333\">" << label << "</text>\n";
    lx += 30 + 6.2 * static_cast<double>(std::string(label).size());
  }
  svg << "<text x=\"" << fmt_svg(lx) << "\" y=\"18\" fill=\"#333\">pale: planned</text>\n";
  for (int i = 0; i * tick <= t_max + 1e-9; ++i) {
    const double x = x_of(i * tick);
    svg << "<line x1=\"" << fmt_svg(x) << "\" y1=\"" << fmt_svg(kLegendH) << "\" x2=\"" << fmt_svg(x) << "\" y2=\""
        << fmt_svg(bottom) << "\" stroke=\"#e6e6e6\"/><text x=\"" << fmt_svg(x) << "\" y=\"" << fmt_svg(bottom + 14)
        << "\" text-anchor=\"middle\" fill=\"#444\">" << fmt_fixed(i * tick, tick < 1 ? 1 : 0) << "</text>\n";
  }
  svg << "<text x=\"" << fmt_svg(plot_x + plot_w / 2) << "\" y=\"" << fmt_svg(bottom + 27)
      << "\" text-anchor=\"middle\" fill=\"#333\">time since the start of the step (ms)</text>\n";
  double y = kLegendH;
  for (const GridRun& g : runs) {
    svg << "<text x=\"4\" y=\"" << fmt_svg(y + 15) << "\" font-weight=\"bold\" font-size=\"12\" fill=\"#222\">"
        << html_escape(g.run->name + " — " + schedule_label(g) + ", P " + std::to_string(g.shape.stages) + ", m " +
                       std::to_string(g.shape.micro_batches) + ": measured " + fmt_fixed(g.measured_ms, 0) +
                       " ms, planned " + fmt_fixed(g.planned_ms, 0) + " ms")
        << "</text>\n";
    y += kHead;
    for (int rank = 0; rank < g.shape.stages; ++rank) {
      for (const bool planned : {false, true}) {
        svg << "<text x=\"" << fmt_svg(kLabelW - 8) << "\" y=\"" << fmt_svg(y + 10) << "\" text-anchor=\"end\" fill=\""
            << (planned ? "#777" : "#333") << "\">" << (planned ? "planned" : "stage " + std::to_string(rank))
            << "</text>";
        draw_blocks(svg, planned ? g.planned : g.measured, rank, y, planned, x_of, g.shape.virtual_stages);
        y += kRowH + kRowGap;
      }
      y += kRankGap;
    }
    y += kPanelGap;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace

std::string pipeline_grid_figure(SectionContext& ctx) {
  // The deepest pipeline with one rank per stage, at its most micro-batches: one run per schedule.
  int stages = 0, micro_batches = 0;
  for (const RunResult& r : ctx.scenario.runs) {
    const int pp = static_cast<int>(json_number_at(r.config, {"parallel", "pp"}).value_or(1));
    const int m = static_cast<int>(json_number_at(r.config, {"train", "accumulation"}).value_or(1));
    if (pp <= 1 || r.world_size != pp) continue;
    if (std::make_pair(pp, m) > std::make_pair(stages, micro_batches)) stages = pp, micro_batches = m;
  }
  if (stages == 0) return "";
  std::vector<GridRun> runs;
  for (const RunResult& r : ctx.scenario.runs) {
    if (r.world_size != stages || json_number_at(r.config, {"parallel", "pp"}).value_or(1) != stages ||
        json_number_at(r.config, {"train", "accumulation"}).value_or(1) != micro_batches)
      continue;
    if (std::optional<GridRun> g = grid_run(r, stages)) runs.push_back(std::move(*g));
  }
  if (runs.empty()) return "";
  std::stable_sort(runs.begin(), runs.end(), [](const GridRun& a, const GridRun& b) {
    return static_cast<int>(a.schedule) < static_cast<int>(b.schedule);
  });
  double height = 0;
  const std::string svg = grid_svg(runs, height);
  const std::string id = "pp_grid_" + ctx.slug;
  const fs::path file = ctx.out_dir / (id + ".svg");
  std::ofstream out(file, std::ios::binary);
  out << "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" << svg;
  if (!out) {
    ctx.log << "error: " << file.string() << ": cannot write the pipeline grid\n";
    ctx.problems.push_back(file.string() + ": cannot write the pipeline grid");
    return "";
  }
  ctx.log << "  chart " << id << ": " << file.filename().string() << "\n";
  std::ostringstream h;
  h << "<figure class=\"chart\" id=\"chart-" << html_escape(id) << "\">\n"
    << "<img class=\"chart-svg\" src=\"" << html_escape(id) << ".svg\" alt=\"measured and planned pipeline steps\" "
    << "width=\"" << fmt_svg(kWidth) << "\" height=\"" << fmt_svg(height) << "\" loading=\"lazy\">\n"
    << "<figcaption><span class=\"what\">One step per schedule at P = " << stages << ", m = " << micro_batches
    << ": each stage's forward (F), backward (B) and weight-gradient (W) blocks as they ran, numbered by micro-batch "
       "(chunk.micro-batch when a rank holds several chunks), and under them, pale, the schedule's plan: the same "
       "actions in the same order, replayed on this run's median F, B and W times per stage with free transfers. "
       "Gaps in the plan are the schedule's bubble; what the run adds beyond them is transfer time and waiting on "
       "slower blocks. From rank&lt;r&gt;/timeline.json and lab/pipeline_schedule.hpp.</span><a href=\""
    << html_escape(id) << ".svg\">SVG</a></figcaption>\n</figure>\n<ul>\n";
  for (const GridRun& g : runs)
    h << "<li>" << html_escape(schedule_label(g)) << ": " << fmt_fixed(g.measured_ms, 0)
      << " ms from the first block to the last, against " << fmt_fixed(g.planned_ms, 0) << " ms planned ("
      << percent_change(g.planned_ms, g.measured_ms) << ").</li>\n";
  // A run under its plan: its blocks' times are not fixed. Named with the spread of its backward blocks.
  const auto under = std::min_element(runs.begin(), runs.end(), [](const GridRun& a, const GridRun& b) {
    return a.measured_ms / a.planned_ms < b.measured_ms / b.planned_ms;
  });
  if (under->planned_ms > 0 && under->measured_ms < under->planned_ms) {
    double lo = 0, hi = 0;
    for (const GridBlock& b : under->measured) {
      if (b.op != PipeOp::backward) continue;
      const double ms = b.end_ms - b.start_ms;
      lo = lo > 0 ? std::min(lo, ms) : ms, hi = std::max(hi, ms);
    }
    h << "<li>A run can come in under its plan: the plan charges every block its stage's median, and the blocks "
         "are not fixed. Where the stages share cores, a block runs faster while the other stages idle (in the "
         "warm-up and the drain) than while all of them compute: "
      << html_escape(schedule_label(*under)) << "'s backward blocks took " << fmt_fixed(lo, 0) << " to "
      << fmt_fixed(hi, 0) << " ms.</li>\n";
  }
  h << "</ul>\n";
  return h.str();
}

}  // namespace dtlab::analysis
