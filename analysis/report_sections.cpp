// report_sections.cpp: the default parts of a scenario section -- text, charts, runs table, reproduce commands.
//
// Each part is a free function over SectionContext so a new study adds a part without touching the others.
#include <algorithm>
#include <set>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "lab/dtype.hpp"

namespace dtlab::analysis {
namespace {

bool is_reduced_precision(const std::string& dtype) {
  const std::optional<Dtype> d = parse_dtype(dtype);
  return d && dtlab::is_reduced_precision(*d);
}

// The runs that stopped out of memory under memory.limit: data points, not failures (charts show completed runs).
std::string out_of_memory_table(const Scenario& sc) {
  if (sc.oom_runs.empty()) return "";
  const auto mib = [](double bytes) { return fmt_fixed(bytes / (1024.0 * 1024.0), 1); };
  std::ostringstream h;
  h << "<p><strong>Out of memory.</strong> These runs stopped under their memory cap (<code>memory.limit</code>, per "
       "rank), every rank together; the charts show the runs that completed.</p>\n"
    << "<table class=\"runs oom\">\n<tr><th>run</th><th>strategy</th><th>rank</th><th>when</th><th>asked for</th>"
       "<th>MiB asked</th><th>MiB in use</th><th>cap MiB</th></tr>\n";
  for (const RunResult& r : sc.oom_runs) {
    const RunResult::OutOfMemory& o = *r.oom;
    h << "<tr><td>" << html_escape(r.name) << "</td><td>" << html_escape(r.strategy) << "</td><td>" << o.rank
      << "</td><td>" << (o.step == 0 ? std::string("setup") : "step " + std::to_string(o.step)) << "</td><td>"
      << html_escape(o.category) << "</td><td>" << mib(o.requested_bytes) << "</td><td>" << mib(o.in_use_bytes)
      << "</td><td>" << mib(o.limit_bytes) << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

// ", but N steps against M" when a run and its time twin differ in train.steps (a slow run trained fewer), else "".
std::string steps_differ(const RunResult& r, const RunResult& twin) {
  const std::optional<double> mine = json_number_at(r.config, {"train", "steps"});
  const std::optional<double> theirs = json_number_at(twin.config, {"train", "steps"});
  if (!mine || !theirs || *mine == *theirs) return "";
  return " but " + fmt_fixed(*mine, 0) + " steps against " + fmt_fixed(*theirs, 0) + ", which changes no step's work";
}

// What bf16/fp16 did to time on the CPU these runs had: the CPU's bf16 support as cpuid reported it (result.json
// context.cpu), and each reduced-precision run's step time against its fp32 twin's, measured here. The text follows
// the data: a result against the CPU's expectation is said to be one.
std::string mixed_precision_callout(const Scenario& sc) {
  std::vector<const RunResult*> reduced;
  for (const RunResult& r : sc.runs)
    if (is_reduced_precision(r.param_dtype())) reduced.push_back(&r);
  if (reduced.empty()) return "";
  std::ostringstream h;
  h << "<div class=\"callout\"><p><strong>Mixed precision on this CPU.</strong> On a CPU-only machine bf16/fp16 is "
       "first of all a saving in memory (parameters, gradients, activations) and communication bytes; what it does "
       "to step time depends on the CPU. ";
  const std::optional<RunResult::Cpu>& cpu = reduced.front()->cpu;
  if (cpu) {
    const std::string bf16_flags = std::string(cpu->avx512_bf16 ? "AVX-512 BF16" : "") +
                                   (cpu->avx512_bf16 && cpu->amx_bf16 ? ", " : "") + (cpu->amx_bf16 ? "AMX-BF16" : "");
    h << "These runs ran on <strong>" << html_escape(cpu->model) << "</strong>, which ";
    if (cpu->native_bf16())
      h << "has native bf16 (cpuid: " << bf16_flags << "): its bf16 matrix multiplies have instructions of their own.";
    else if (!bf16_flags.empty())  // the flags are there, but the run's environment kept oneDNN below them
      h << "has no native bf16 in these runs: the CPU has " << bf16_flags << " (cpuid), but <code>"
        << html_escape(cpu->kernels_capped_by)
        << "</code> kept oneDNN from those instructions, as on a CPU without them, so expect bf16 to cost time.";
    else
      h << "has no native bf16 (cpuid: no AVX-512 BF16, no AMX"
        << (cpu->avx512f ? "; AVX-512F"
            : cpu->avx2  ? "; AVX2"
                         : "")
        << "): bf16 matrix multiplies are converted to fp32 and back, so expect bf16 to cost time.";
  } else {
    h << "The CPU of these runs was not recorded (result.json written before context.cpu): read the times below "
         "without knowing whether bf16 was native.";
  }
  h << "</p>\n<ul>\n";
  for (const RunResult* r : reduced) {
    const RunResult* twin = fp32_time_twin(sc, *r);
    if (!twin || twin->step_ms_median <= 0 || r->step_ms_median <= 0) {
      h << "  <li>" << html_escape(r->name) << " (" << html_escape(r->param_dtype())
        << "): no fp32 run of this scenario differs from it only in precision (and the number of steps), so its "
           "time has nothing to be compared with here.</li>\n";
      continue;
    }
    const double ratio = r->step_ms_median / twin->step_ms_median;
    const bool slower = ratio > 1;
    h << "  <li><strong>" << html_escape(r->name) << "</strong> (" << html_escape(r->param_dtype())
      << "): " << fmt_fixed(r->step_ms_median, 0) << " ms per step against " << fmt_fixed(twin->step_ms_median, 0)
      << " ms for " << html_escape(twin->name) << " (fp32, otherwise the same" << steps_differ(*r, *twin)
      << "): " << fmt_fixed(slower ? ratio : 1 / ratio, 2) << "× " << (slower ? "slower" : "faster");
    if (cpu && slower && cpu->native_bf16())
      h << ", even though this CPU has native bf16 (probably the conversions and the fp32 work around the matrix "
           "multiplies, which bf16 does not speed up, at this size)";
    if (cpu && !slower && !cpu->native_bf16())
      h << ", even though this CPU has no native bf16 (probably the memory and bytes it saves outweigh its slower "
           "matrix multiplies here)";
    h << ".</li>\n";
  }
  h << "</ul></div>\n";
  return h.str();
}

// The distinct values of config `section.key` over the runs, as text: "a", "a, b" or, for numbers, "lo–hi" when
// there are more than two.
// `section` "" reads a top-level key.
std::string distinct_values(const Scenario& sc, const std::string& section, const char* key) {
  std::vector<std::string> texts;
  std::vector<double> numbers;
  for (const RunResult& r : sc.runs) {
    const nlohmann::json& where = section.empty() ? r.config : r.config.value(section, nlohmann::json::object());
    if (!where.is_object() || !where.contains(key)) continue;
    const nlohmann::json& v = where[key];
    const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (std::find(texts.begin(), texts.end(), text) == texts.end()) texts.push_back(text);
    if (v.is_number()) numbers.push_back(v.get<double>());
  }
  if (texts.size() > 2 && numbers.size() == sc.runs.size()) {
    const auto [lo, hi] = std::minmax_element(numbers.begin(), numbers.end());
    return fmt_fixed(*lo, 0) + "–" + fmt_fixed(*hi, 0);
  }
  std::string out;
  for (const std::string& t : texts) out += (out.empty() ? "" : ", ") + t;
  return out;
}

// One sentence on what the study ran, read from its runs' configs: strategies, ranks, model shape, batch, steps. A
// fact the configs do not hold (results written by an older dtlab) is left out of the sentence.
std::string study_setup(const Scenario& sc) {
  if (sc.runs.empty()) return "";
  std::set<std::string> strategies;
  std::set<int> worlds;
  int nodes = 1;
  for (const RunResult& r : sc.runs) {
    strategies.insert(r.strategy);
    worlds.insert(r.world_size);
    nodes = std::max(nodes, r.nodes);
  }
  std::string list;
  for (const std::string& s : strategies) list += (list.empty() ? "" : ", ") + s;
  std::string ranks;
  for (int w : worlds) ranks += (ranks.empty() ? "" : ", ") + std::to_string(w);
  std::ostringstream out;
  out << sc.runs.size() << " run" << (sc.runs.size() == 1 ? "" : "s") << " of " << list << "; " << ranks << " rank(s)";
  if (nodes > 1) out << " on " << nodes << " emulated nodes";
  // "<before><values><after>" for each config fact that some run records.
  const auto fact = [&](const char* before, const char* section, const char* key, const char* after) {
    const std::string values = distinct_values(sc, section, key);
    if (!values.empty()) out << before << values << after;
  };
  fact("; model ", "model", "preset", "");
  fact(", d_model ", "model", "d_model", "");
  fact(", ", "model", "n_layers", " blocks");
  fact(", ", "model", "seq_len", " tokens per sequence");
  fact("; ", "train", "global_batch", " sequences per step");
  fact(", ", "train", "steps", " steps");
  fact("; ", "precision", "param_dtype", " parameters");
  out << ".";
  return out.str();
}

std::string intro_part(SectionContext& ctx) {
  const Scenario& sc = ctx.scenario;
  std::ostringstream h;
  if (!sc.question.empty())
    h << "<p class=\"question\"><strong>The question.</strong> " << html_escape(sc.question) << "</p>\n";
  if (const std::string setup = study_setup(sc); !setup.empty())
    h << "<p class=\"setup\"><strong>The setup.</strong> " << html_escape(setup) << "</p>\n";
  if (!sc.description.empty()) h << "<p class=\"desc\">" << html_escape(sc.description) << "</p>\n";
  if (!sc.notes.empty()) {
    h << "<ul class=\"notes\">\n";
    for (const std::string& n : sc.notes) h << "  <li>" << html_escape(n) << "</li>\n";
    h << "</ul>\n";
  }
  if (!sc.look_for.empty())
    h << "<p class=\"lookfor\"><strong>What to look for.</strong> " << html_escape(sc.look_for) << "</p>\n";
  h << mixed_precision_callout(sc);
  if (sc.runs.empty() && sc.oom_runs.empty()) h << "<p class=\"muted\">This scenario lists no runs.</p>\n";
  h << out_of_memory_table(sc);
  return h.str();
}

// One series per run from its per-step records; nullopt if no run has any.
std::optional<Chart> step_chart(const Scenario& sc, const std::string& title, const std::string& y_label,
                                bool y_from_zero, double StepRecord::*field) {
  LineChart c;
  c.title = title;
  c.x_label = "step";
  c.y_label = y_label;
  c.y_from_zero = y_from_zero;
  bool any = false;
  for (const RunResult& r : sc.runs) {
    Series s;
    s.name = r.name;
    for (const StepRecord& st : r.chart_steps()) {
      s.x.push_back(static_cast<double>(st.step));
      s.y.push_back(st.*field);
    }
    any = any || !s.x.empty();
    c.series.push_back(std::move(s));
  }
  if (!any) return std::nullopt;
  return c;
}

std::optional<Chart> loss_chart(const Scenario& sc) {
  return step_chart(sc, sc.title + ": loss vs step", "training loss (nats/token)", false, &StepRecord::loss);
}

std::optional<Chart> step_time_chart(const Scenario& sc) {
  std::optional<Chart> chart =
      step_chart(sc, sc.title + ": step time vs step", "step time (ms)", true, &StepRecord::step_ms);
  int warmup = 0;
  for (const RunResult& r : sc.runs) warmup = std::max(warmup, r.warmup_steps());
  if (chart && warmup > 0) {
    auto& line = std::get<LineChart>(*chart);
    line.shade_until_x = warmup + 0.5;  // between the last warm-up step and the first timed one
    line.shade_label = "warm-up";
  }
  return chart;
}

std::optional<Chart> throughput_chart(const Scenario& sc) {
  if (sc.runs.empty()) return std::nullopt;
  BarChart c;
  c.title = sc.title + ": throughput per run";
  c.y_label = "throughput (tokens/s, all ranks)";
  c.series_names = {"tokens/s"};
  c.values.resize(1);
  for (const RunResult& r : sc.runs) {
    c.categories.push_back(r.name);
    c.values[0].push_back(r.tokens_per_s);
  }
  return c;
}

std::string table_part(SectionContext& ctx) {
  const Scenario& sc = ctx.scenario;
  if (sc.runs.empty()) return "";
  const bool any_mfu =
      std::any_of(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) { return r.mfu_pct.has_value(); });
  std::set<std::string> dtypes;
  for (const RunResult& r : sc.runs) dtypes.insert(r.param_dtype());
  const bool show_precision = dtypes.size() > 1 || !dtypes.count("fp32");
  const bool show_links = std::any_of(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) { return r.nodes > 1; });
  // "4 (2 nodes × 2)" for a job across nodes; the links it crossed in a column of their own.
  const auto world_cell = [](const RunResult& r) {
    std::string cell = std::to_string(r.world_size);
    if (r.nodes > 1)
      cell += " <span class=\"range\">(" + std::to_string(r.nodes) + " nodes &times; " +
              std::to_string(r.ranks_per_node) + ")</span>";
    return cell;
  };
  const auto links_cell = [](const RunResult& r) {
    if (r.nodes <= 1) return std::string("one node");
    return "between nodes " + html_escape(r.inter_link.empty() ? "unknown" : r.inter_link) + ", inside " +
           html_escape(r.intra_link.empty() ? "unknown" : r.intra_link);
  };

  std::ostringstream h;
  h << "<h3>Runs</h3>\n<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr>"
    << "<th>run</th><th>strategy</th><th class=\"num\">world size</th><th>preset</th>"
    << (show_precision ? "<th>precision</th>" : "") << (show_links ? "<th>links</th>" : "")
    << "<th class=\"num\">params</th><th class=\"num\">steps (timed)</th><th class=\"num\">final loss</th>"
    << "<th class=\"num\">step ms median <span class=\"range\">(min–max)</span></th>"
    << "<th class=\"num\">tokens/s</th><th class=\"num\">TFLOPS</th>" << (any_mfu ? "<th class=\"num\">MFU %</th>" : "")
    << "</tr></thead>\n<tbody>\n";
  for (const RunResult& r : sc.runs) {
    h << "<tr><td>" << html_escape(r.name) << "</td><td><code>" << html_escape(r.strategy) << "</code></td>"
      << "<td class=\"num\">" << world_cell(r) << "</td><td>" << html_escape(r.preset.empty() ? "–" : r.preset)
      << "</td>" << (show_precision ? "<td>" + html_escape(r.param_dtype()) + "</td>" : "")
      << (show_links ? "<td>" + links_cell(r) + "</td>" : "") << "<td class=\"num\">"
      << html_escape(fmt_params(r.params)) << "</td>"
      << "<td class=\"num\">" << r.chart_steps().size() << " <span class=\"range\">(" << r.measured_steps
      << ")</span></td>"
      << "<td class=\"num\">" << html_escape(fmt_fixed(r.final_loss, 4)) << "</td>"
      << "<td class=\"num\">" << html_escape(fmt_fixed(r.step_ms_median, 1)) << " <span class=\"range\">("
      << html_escape(fmt_fixed(r.step_ms_min, 1)) << "–" << html_escape(fmt_fixed(r.step_ms_max, 1)) << ")</span></td>"
      << "<td class=\"num\">" << html_escape(fmt_grouped(r.tokens_per_s)) << "</td>"
      << "<td class=\"num\">" << html_escape(fmt_fixed(r.tflops, 3)) << "</td>";
    if (any_mfu) h << "<td class=\"num\">" << (r.mfu_pct ? html_escape(fmt_fixed(*r.mfu_pct, 1)) : "–") << "</td>";
    h << "</tr>\n";
  }
  h << "</tbody></table></div>\n"
    << "<p class=\"muted\" style=\"font-size:12.5px;margin:4px 0 0\">steps: recorded steps (timed steps after "
       "warm-up in parentheses); step time and tokens/s are over the timed steps only.</p>\n";
  return h.str();
}

// Median exposed communication wait per run (only when some run communicates).
std::optional<Chart> comm_wait_chart(const Scenario& sc) {
  const bool any = std::any_of(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) {
    return r.world_size > 1 && r.comm_wait_ms_median.has_value();
  });
  if (!any) return std::nullopt;
  BarChart c;
  c.title = sc.title + ": time waiting on communication";
  c.y_label = "median ms per step (exposed)";
  c.series_names = {"communication wait", "rest of the step"};
  c.stacked = true;
  c.values.resize(2);
  for (const RunResult& r : sc.runs) {
    const double wait = r.comm_wait_ms_median.value_or(0.0);
    c.categories.push_back(r.name);
    c.values[0].push_back(wait);
    c.values[1].push_back(std::max(0.0, r.step_ms_median - wait));
  }
  return c;
}

constexpr double kMiB = 1024.0 * 1024.0;

// Rank 0's memory by category, stacked (only when runs recorded it).
std::optional<Chart> memory_chart(const Scenario& sc) {
  const bool any = std::any_of(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) { return r.memory.has_value(); });
  if (!any) return std::nullopt;
  BarChart c;
  c.title = sc.title + ": memory per rank by category";
  c.y_label = "MiB (rank 0)";
  c.series_names = {"parameters", "gradients", "optimizer state", "buffers (gathered, comm)", "activations (estimate)"};
  c.stacked = true;
  c.values.resize(5);
  for (const RunResult& r : sc.runs) {
    const RunResult::Memory m = r.memory.value_or(RunResult::Memory{});
    c.categories.push_back(r.name);
    c.values[0].push_back(m.params / kMiB);
    c.values[1].push_back(m.grads / kMiB);
    c.values[2].push_back(m.optimizer / kMiB);
    c.values[3].push_back(m.buffers / kMiB);
    c.values[4].push_back(m.activations.value_or(0.0) / kMiB);
  }
  return c;
}

// Bytes rank 0 put into collectives per step, by op (only for runs that communicate).
std::optional<Chart> comm_bytes_chart(const Scenario& sc) {
  std::set<std::string> ops;
  for (const RunResult& r : sc.runs)
    for (const auto& [op, bytes] : r.comm_bytes_per_step_by_op)
      if (bytes > 64) ops.insert(op);  // leave out the 8-byte norm and flag reductions
  if (ops.empty()) return std::nullopt;
  BarChart c;
  c.title = sc.title + ": bytes communicated per step";
  c.y_label = "MiB per step (rank 0, nccl-tests bytes)";
  c.stacked = true;
  for (const auto& op : ops) c.series_names.push_back(op);
  c.values.resize(ops.size());
  for (const RunResult& r : sc.runs) {
    c.categories.push_back(r.name);
    size_t i = 0;
    for (const auto& op : ops) {
      auto it = r.comm_bytes_per_step_by_op.find(op);
      c.values[i++].push_back(it == r.comm_bytes_per_step_by_op.end() ? 0.0 : it->second / kMiB);
    }
  }
  return c;
}

// Scaling efficiency against the scenario's one-process, one-thread run: tokens/s of a W-rank run
// (one thread per rank) over W times the one-thread run's tokens/s. Shown when such a run exists.
std::string scaling_part(SectionContext& ctx) {
  const Scenario& sc = ctx.scenario;
  const RunResult* base = nullptr;
  for (const RunResult& r : sc.runs)
    if (r.world_size == 1 && r.threads == 1) base = &r;
  const bool any_distributed =
      std::any_of(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) { return r.world_size > 1; });
  if (!base || !any_distributed || base->tokens_per_s <= 0) return "";
  std::ostringstream h;
  h << "<h3>Scaling</h3>\n<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>run</th>"
    << "<th class=\"num\">ranks &times; threads</th><th class=\"num\">tokens/s</th><th class=\"num\">tokens/s per "
       "rank</th>"
    << "<th class=\"num\">speed-up vs " << html_escape(base->name) << "</th><th class=\"num\">scaling efficiency</th>"
    << "<th class=\"num\">comm wait ms (median)</th></tr></thead>\n<tbody>\n";
  for (const RunResult& r : sc.runs) {
    const double speedup = r.tokens_per_s / base->tokens_per_s;
    const double efficiency = speedup / std::max(1, r.world_size * std::max(1, r.threads));
    h << "<tr><td>" << html_escape(r.name) << "</td><td class=\"num\">" << r.world_size << " &times; " << r.threads
      << "</td><td class=\"num\">" << html_escape(fmt_grouped(r.tokens_per_s)) << "</td><td class=\"num\">"
      << html_escape(fmt_grouped(r.tokens_per_s / std::max(1, r.world_size))) << "</td><td class=\"num\">"
      << html_escape(fmt_fixed(speedup, 2)) << "&times;</td><td class=\"num\">"
      << html_escape(fmt_fixed(100.0 * efficiency, 0)) << "%</td><td class=\"num\">"
      << (r.comm_wait_ms_median ? html_escape(fmt_fixed(*r.comm_wait_ms_median, 1)) : "–") << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n<p class=\"muted\" style=\"font-size:12.5px;margin:4px 0 0\">Scaling efficiency = "
       "tokens/s / (ranks &times; threads &times; tokens/s of the one-process, one-thread run): 100% means each "
       "added core did a full core's work. Communication wait is the time after backward spent waiting for "
       "gradient all-reduces that did not overlap with compute.</p>\n";
  return h.str();
}

std::string reproduce_part(SectionContext& ctx) {
  const Scenario& sc = ctx.scenario;
  if (sc.runs.empty() && sc.oom_runs.empty()) return "";
  std::vector<const RunResult*> runs;  // the completed runs, then those that stopped out of memory
  for (const RunResult& r : sc.runs) runs.push_back(&r);
  for (const RunResult& r : sc.oom_runs) runs.push_back(&r);
  std::ostringstream h;
  h << "<h3>Reproduce</h3>\n<dl class=\"repro\">\n";
  for (const RunResult* run : runs) {
    const RunResult& r = *run;
    h << "<dt>" << html_escape(r.name) << " <span class=\"muted\" style=\"font-weight:400\">— " << html_escape(r.dir)
      << "</span></dt>\n<dd>";
    if (r.command.empty()) {
      h << "<span class=\"muted\">command not recorded in result.json (context.command)</span>";
    } else {
      h << "<pre><code>" << html_escape(r.command) << "</code></pre>";
    }
    h << "</dd>\n";
  }
  h << "</dl>\n";
  return h.str();
}

}  // namespace

std::vector<SectionPart> default_section_parts() {
  return {
      intro_part,
      chart_part("loss", "Training loss per step, one line per run. Equivalent strategies should overlap.", loss_chart),
      chart_part("step_time", "Wall time of each step (ms). Early warm-up steps are excluded from the table's median.",
                 step_time_chart),
      chart_part("throughput", "Tokens processed per second by all ranks, over the timed steps.", throughput_chart),
      chart_part("memory",
                 "Rank 0's bytes by category: parameters, gradients and optimizer state it keeps, transient buffers "
                 "at the peak (gathered units, communication), and activations estimated as the counting "
                 "allocator's peak minus the rest.",
                 memory_chart),
      chart_part("comm_bytes",
                 "Bytes rank 0 hands to collectives per optimizer step, by operation (nccl-tests convention: the "
                 "buffer for all-reduce, the gathered size for all-gather and reduce-scatter).",
                 comm_bytes_chart),
      chart_part("comm_wait",
                 "Median step time split into exposed communication wait (after backward, waiting for "
                 "collectives) and everything else.",
                 comm_wait_chart),
      instrument_part,
      table_part,
      scaling_part,
      crossover_part,
      fit_part,
      memory_scaling_part,
      precision_part,
      accumulation_part,
      granularity_part,
      checkpointing_part,
      offload_part,
      tensor_parallel_part,
      pipeline_part,
      saving_part,
      advice_part,
      prediction_part,
      answer_part,
      reproduce_part,
  };
}

}  // namespace dtlab::analysis
