// report.hpp: render results into a self-contained HTML report with gnuplot charts (torch-free).
//
// Usage:
//   std::vector<std::string> inputs = {"results/baseline", "results/ddp_vs_fsdp"};
//   int rc = dtlab::analysis::render_report(inputs, "reports/latest", std::cerr);
//   // -> reports/latest/index.html, and per chart <id>.dat, <id>.gp, <id>.svg (inlined), <id>.png (linked)
//
// A report is a header, a "How to read this report" box, then one section per scenario. A section is a list
// of parts (SectionPart), rendered in order: description and notes, charts, the runs table, the reproduce
// commands. Later studies extend a report by adding parts (e.g. a memory-by-category chart), not by editing
// the page skeleton; chart_part() turns a chart builder into a part that writes, renders and inlines a chart.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "analysis/plot.hpp"
#include "analysis/results.hpp"

namespace dtlab::analysis {

// What a part sees while rendering one scenario's section.
struct SectionContext {
  const Scenario& scenario;
  std::string slug;                    // scenario id made unique within the report; chart ids end with it
  std::filesystem::path out_dir;       // where charts are written
  std::string out_dir_display;         // out_dir as the user typed it, for the `cd ... && gnuplot` hint
  std::ostream& log;                   // progress and warnings
  std::vector<std::string>& problems;  // append one line per thing that went wrong; the report still renders
};

// Returns an HTML fragment (already escaped) or "" to contribute nothing.
using SectionPart = std::function<std::string(SectionContext&)>;

using Chart = std::variant<LineChart, BarChart>;
// Builds a chart for a scenario, or nullopt when the scenario has no data for it (e.g. no per-step records).
// The builder leaves Chart::id empty; chart_part sets it to "<kind>_<slug>".
using ChartBuilder = std::function<std::optional<Chart>(const Scenario&)>;

// A part that builds the chart, writes <kind>_<slug>.dat/.gp, runs gnuplot and emits a <figure> with the SVG
// inlined, links to PNG/script/data and the rerun command. If gnuplot fails, the figure says why.
SectionPart chart_part(std::string kind, std::string caption, ChartBuilder build);

// The page's opening summary (analysis/report_summary.cpp): every strategy's step time, peak memory and bytes as
// multiples of its baseline twin's (result.json context.baseline) over all studies, with the catalogue's "choose it
// when" line, as a table and a chart written to out_dir. "" when no run has a baseline twin.
std::string strategy_summary_section(const std::vector<Scenario>& scenarios, const std::filesystem::path& out_dir,
                                     const std::string& out_dir_display, std::ostream& log,
                                     std::vector<std::string>& problems);

// Predicted vs measured for the runs whose result.json carries "prediction": twin bars, scatters against
// y = x, a table of errors (analysis/report_prediction.cpp). "" when no run of the scenario has one.
std::string prediction_part(SectionContext& ctx);

// Step time and exposed communication against the inter-node link rate for studies swept over rates, measured and
// predicted, and the rate where exposed communication falls under 10% of the step (analysis/report_crossover.cpp,
// analysis/crossover.hpp). "" when the scenario has no series over two or more rates.
std::string crossover_part(SectionContext& ctx);

// What fits under a memory cap, for studies over a ladder of model sizes with memory.limit (analysis/report_fit.cpp,
// analysis/fit_ladder.hpp): per series and size, fit or out-of-memory, the peak against the cap, the memory model's
// prediction, and takeaways computed from the runs. "" when the scenario has no such ladder.
std::string fit_part(SectionContext& ctx);

// Memory per rank as the job grows, for studies over world sizes (runs <series>@w<N>; analysis/report_scaling.cpp,
// analysis/scaling.hpp): state and peak per rank against ranks, measured and modelled to 1024, step times only where
// each rank had a core, a table by category, and takeaways computed from the runs. "" when there is no such sweep.
std::string memory_scaling_part(SectionContext& ctx);

// Gradient accumulation, for studies that split one global batch into more micro-steps (runs <series>@<label> whose
// configs differ in train.accumulation; analysis/report_accumulation.cpp): bytes per optimizer step measured and
// modelled, peak memory and step time against micro-steps, with takeaways from the runs. "" when there is none.
std::string accumulation_part(SectionContext& ctx);

// Granularity, for series whose runs differ only in DDP's bucket size or FSDP's wrap (analysis/report_granularity.cpp):
// calls per step, overlap %, exposed wait, buffers and step time per run, with takeaways. "" when there is none.
std::string granularity_part(SectionContext& ctx);

// Activation checkpointing, for series whose runs differ in parallel.activation_checkpointing / checkpoint_every
// (analysis/report_checkpointing.cpp): activation memory against step time per series (measured and modelled,
// points labelled by setting), a table, and takeaways naming the settings another beats on both. "" when none.
std::string checkpointing_part(SectionContext& ctx);
// CPU offload, for series whose two runs differ only in parallel.offload (analysis/report_offload.cpp): each rank's
// memory split into the device side and offload's host buffers, step time against the model's, takeaways. "" when none.
std::string offload_part(SectionContext& ctx);
// Tensor parallelism, for studies with runs that set parallel.tp > 1 (analysis/report_tensor_parallel.cpp): each
// layout's step time, exposed communication and peak per rank against the model's at each link rate, what placing tp
// across nodes cost (a run against its twin with tp inside the nodes), the fastest layout per rate. "" when none.
std::string tensor_parallel_part(SectionContext& ctx);
// Pipeline parallelism, for runs that set parallel.pp > 1 (analysis/report_pipeline.cpp): each stage's idle fraction
// and the bubble beside the schedule's formula against the micro-batches per step, each stage's activations beside
// the model's, and which schedule idled least and ran fastest at each m. "" when none.
std::string pipeline_part(SectionContext& ctx);
// Its step grid (analysis/report_pipeline_grid.cpp): for each schedule at the deepest pipeline and most micro-batches,
// every stage's F, B and W blocks as they ran above the schedule's plan replayed on the run's own block times, with
// the measured and planned step. "" when no such run has its stages' timelines.
std::string pipeline_grid_figure(SectionContext& ctx);
// Training checkpoints: bytes written per strategy against the checkpoint model, save and load times, async
// (analysis/report_saving.cpp).
std::string saving_part(SectionContext& ctx);
// The advisor's verification, for a `dtlab advise --verify` directory (its advice.json; analysis/report_advice.cpp):
// whether the advice held, feasibility as predicted, the explanation, predicted against measured per run.
std::string advice_part(SectionContext& ctx);

// Precision: every bf16/fp16 run against its fp32 twin (the run whose config differs only in `precision`;
// analysis/report_precision.cpp): loss difference per step, memory, bytes and time, the dynamic loss scale and
// skipped steps over time, with takeaways computed from the runs. "" when no reduced-precision run has a twin.
std::string precision_part(SectionContext& ctx);

// Instrumentation views of a scenario (analysis/report_instrument.cpp and the files it names): a one-step timeline
// per run with compute and comm lanes per rank (SVG drawn directly), step time stacked by phase, overlap % per run.
// Reads result.json's steps[].phases_ms, summary.phases_ms, comm, and rank<r>/timeline.json; "" when no run has them.
std::string instrument_part(SectionContext& ctx);

// The collective benchmark, a section of its own after the scenarios (analysis/report_comm_bench.cpp): every
// comm_bench.json found below `inputs` -> bus bandwidth vs message size per op/algorithm with the point-to-point
// reference line, and a table. "" when there is none.
std::string comm_bench_section(const std::vector<std::string>& inputs, const std::filesystem::path& out_dir,
                               const std::string& out_dir_display, std::ostream& log,
                               std::vector<std::string>& problems);

// `dtlab compare --json` results, a section of their own after the scenarios (analysis/report_comparison.cpp): every
// comparison.json found below `inputs` -> per compared run, a table of medians, ratio, interval and verdict. "" when
// there is none; an unreadable file is appended to `problems`.
std::string comparison_section(const std::vector<std::string>& inputs, std::ostream& log,
                               std::vector<std::string>& problems);

// The close of a section (analysis/report_answer.cpp): the fastest and slowest run, the least and most memory per
// rank, how closely runs of one model agree in loss, the runs out of memory; "" for a study that answers itself.
std::string answer_part(SectionContext& ctx);

// Description + notes, loss/step-time/throughput charts, the runs table, reproduce commands.
std::vector<SectionPart> default_section_parts();

// Loads every input (see discover() in results.hpp) and writes out_dir/index.html plus the chart files.
// Returns 0 on success; 1 if the inputs could not be loaded (nothing written, reason logged, e.g. a result.json
// that is not JSON or lacks a required key, naming the file and key), if out_dir cannot be created or written
// (naming it), or if the report was written with problems (e.g. a chart failed; each problem logged and shown in
// the page).
// NOTE: the report is rendered into a hidden dir inside out_dir (.dtlab-report-XXXXXX) and its files are then
// renamed into out_dir, index.html last: a render that fails leaves an earlier report in out_dir as it was.
int render_report(const std::vector<std::string>& inputs, const std::string& out_dir, std::ostream& log);
int render_report(const std::vector<std::string>& inputs, const std::string& out_dir, std::ostream& log,
                  const std::vector<SectionPart>& parts);

}  // namespace dtlab::analysis
