// figures_doc.cpp: docs/performance.md written from a results tree; see figures_doc.hpp.
#include "analysis/figures_doc.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "analysis/accuracy.hpp"
#include "analysis/course.hpp"
#include "analysis/html.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A table cell: the number, or "–" when the run did not record it.
std::string cell(std::optional<double> v, int decimals) { return v ? fmt_fixed(*v, decimals) : "–"; }
std::optional<double> positive(double v) { return v > 0 ? std::optional<double>(v) : std::nullopt; }

// "a, b and c" from distinct values, in first-seen order; "not recorded" when none.
std::string listed(const std::vector<std::string>& values) {
  std::vector<std::string> distinct;
  for (const std::string& v : values)
    if (!v.empty() && std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
  if (distinct.empty()) return "not recorded";
  std::string out;
  for (std::size_t i = 0; i < distinct.size(); ++i)
    out += (i == 0 ? "" : i + 1 == distinct.size() ? " and " : ", ") + distinct[i];
  return out;
}

// The machine as cpuid described it to each run: model, cores, and the vector units that decide the kernels.
std::string machine_of(const RunResult& r) {
  if (!r.cpu) return r.host.empty() ? "" : r.host + " (cpuid not recorded)";
  const RunResult::Cpu& c = *r.cpu;
  std::string units = c.avx512f ? "AVX-512" : c.avx2 ? "AVX2, no AVX-512" : "no AVX2";
  if (c.amx_bf16) units += ", AMX bf16";
  if (c.avx512_bf16) units += ", AVX-512 bf16";
  if (!c.kernels_capped_by.empty()) units += ", kernels capped by " + c.kernels_capped_by;
  return c.model + ", " + std::to_string(c.cores) + " cores, " + units;
}

std::string header(const std::vector<Scenario>& scenarios, const std::vector<std::string>& inputs) {
  std::vector<std::string> commits, machines, dates;
  std::size_t runs = 0;
  for (const Scenario& sc : scenarios)
    for (const RunResult& r : sc.runs) {
      ++runs;
      commits.push_back(r.git_sha.substr(0, 12));
      machines.push_back(machine_of(r));
      if (!r.started_at.empty()) dates.push_back(r.started_at.substr(0, 10));
    }
  std::sort(dates.begin(), dates.end());
  std::string inputs_text;
  for (const std::string& in : inputs) inputs_text += " " + in;
  std::ostringstream md;
  md << "# dtlab performance figures\n\n"
     << "The figures of one `make benchmark` run, one section per study in the report's order: what each run measured "
        "beside what the cost model predicted for it. This page is generated; do not edit it by hand. After a `make "
        "benchmark`, regenerate it with\n\n"
     << "    make figures    # build/bin/dtlab-report --figures" << inputs_text << " > docs/performance.md\n\n"
     << "| | |\n|---|---|\n"
     << "| commit | " << listed(commits) << " |\n"
     << "| machine (cpuid) | " << listed(machines) << " |\n"
     << "| dates | " << (dates.empty() ? "not recorded" : dates.front() + " to " + dates.back()) << " |\n"
     << "| runs | " << runs << " completed in " << scenarios.size() << " studies |\n\n"
     << "Columns: the median step time over the timed steps (warm-up left out) and the cost model's prediction; "
        "tokens per second over all ranks; the largest device-side peak of tensor memory on any rank and the "
        "model's; the loss after the last step. \"–\": the run did not record it. Each run's own command is in its "
        "`result.json` (`context.command`); how to read the figures is in [studies.md](studies.md) and "
        "[lessons.md](lessons.md).\n";
  return md.str();
}

std::string study_section(const Scenario& sc) {
  std::ostringstream md;
  const std::optional<int> place = course_place(sc.name);
  md << "\n## "
     << (place              ? course()[*place - 1].topic
         : sc.title.empty() ? sc.name
                            : sc.title)
     << " (`" << sc.name << "`)\n\n";
  if (!sc.question.empty()) md << sc.question << "\n\n";
  md << "Rerun: `build/bin/scenario_" << sc.name << " --out results`, then `make report`.\n\n"
     << "| run | strategy | world | step (ms) | predicted (ms) | tokens/s | peak per rank (MiB) | predicted (MiB) | "
        "final loss |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const RunResult& r : sc.runs) {
    std::optional<double> predicted_peak = json_number_at(r.raw, {"prediction", "memory_bytes", "device_peak"});
    if (!predicted_peak) predicted_peak = json_number_at(r.raw, {"prediction", "memory_bytes", "peak"});
    const std::optional<double> peak = positive(largest_rank_device_side_peak(r) / kMiB);
    md << "| " << r.name << " | " << r.strategy << " | " << r.world_size << " | " << cell(positive(r.step_ms_median), 1)
       << " | " << cell(json_number_at(r.raw, {"prediction", "step_ms"}), 1) << " | "
       << cell(positive(r.tokens_per_s), 0) << " | " << cell(peak, 1) << " | "
       << cell(predicted_peak ? std::optional<double>(*predicted_peak / kMiB) : std::nullopt, 1) << " | "
       << cell(std::isfinite(r.final_loss) && !r.steps.empty() ? std::optional<double>(r.final_loss) : std::nullopt, 4)
       << " |\n";
  }
  if (!sc.oom_runs.empty()) {
    md << "\nOut of memory under `memory.limit`:";
    for (std::size_t i = 0; i < sc.oom_runs.size(); ++i) {
      const RunResult& r = sc.oom_runs[i];
      md << (i ? "; " : " ") << r.name;
      if (r.oom)
        md << " (rank " << r.oom->rank << ", step " << r.oom->step << ", " << r.oom->category << " asked "
           << fmt_fixed(r.oom->requested_bytes / kMiB, 1) << " MiB)";
    }
    md << ".\n";
  }
  return md.str();
}

// The accuracy report without its per-run lines ("  study/run ...", and their indented "why:" continuations): the
// targets, the medians and the verdicts, so the page stays one screen of summary per target.
std::string accuracy_summary(const std::string& report) {
  std::istringstream in(report);
  std::ostringstream out;
  for (std::string line; std::getline(in, line);) {
    const bool continuation = line.rfind("    ", 0) == 0;
    const std::size_t slash = line.find('/'), space = line.find(' ', 2);
    const bool run_line = line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ' && slash != std::string::npos &&
                          (space == std::string::npos || slash < space);
    if (!continuation && !run_line) out << line << "\n";
  }
  return out.str();
}

}  // namespace

std::string figures_doc(const std::vector<Scenario>& scenarios, const std::vector<std::string>& inputs) {
  std::ostringstream md;
  md << header(scenarios, inputs);
  for (const Scenario& sc : scenarios)
    if (!sc.runs.empty() || !sc.oom_runs.empty()) md << study_section(sc);
  std::ostringstream accuracy;
  print_accuracy(evaluate_accuracy(scenarios), accuracy);
  md << "\n## The cost model against these runs\n\n"
     << "The summary of `build/bin/dtlab-report --accuracy results` over the same runs (that command lists every run "
        "against each target); the targets are in [cost-models.md](cost-models.md).\n\n```\n"
     << accuracy_summary(accuracy.str()) << "```\n";
  return md.str();
}

int run_figures_doc(const std::vector<std::string>& inputs, std::ostream& out, std::ostream& log) {
  std::vector<Scenario> scenarios;
  try {
    scenarios = in_course_order(discover(inputs));
  } catch (const AnalysisError& e) {
    log << "error: " << e.what() << "\n";
    return 1;
  }
  std::size_t runs = 0;
  for (const Scenario& sc : scenarios) runs += sc.runs.size();
  if (runs == 0) {
    log << "error: no completed run below the inputs; --figures writes the figures of a `make benchmark` run\n";
    return 1;
  }
  out << figures_doc(scenarios, inputs);
  return 0;
}

}  // namespace dtlab::analysis
