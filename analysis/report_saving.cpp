// report_saving.cpp: the "Training checkpoints" part of a scenario section, for runs whose result.json records
// checkpoint saves or a resume (checkpoints.saves, checkpoints.resumed_from; docs/checkpointing.md): the bytes each
// save wrote (rank 0's and the whole checkpoint's) against the checkpoint model's exact bytes, how long the loop was
// held and how long the write took against the model's time at the measured disk rate, how much of an async save hid
// behind training, the snapshot it held (and the extra tensor memory the counting allocator saw during the save), and
// the load time of runs that resumed (torch-free).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "lab/stats.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct SavingRun {
  const RunResult* run = nullptr;
  bool async = false;
  int saves = 0;
  double rank0_bytes = 0, total_bytes = 0;  // measured, per save (the last one)
  double held_ms = 0, write_ms = 0;         // medians over the run's saves
  double snapshot_bytes = 0;
  std::optional<double> extra_bytes;  // the allocator's count of what the save held beyond the state (newer runs)
  std::optional<double> model_rank0, model_total, model_write_ms, model_writers;
};

struct LoadingRun {
  const RunResult* run = nullptr;
  std::string saved_by;
  double load_ms = 0, bytes_read = 0;
};

std::vector<SavingRun> saving_runs(const Scenario& sc) {
  std::vector<SavingRun> out;
  for (const RunResult& r : sc.runs) {
    const nlohmann::json saves = r.raw.value("checkpoints", nlohmann::json::object()).value("saves", nlohmann::json());
    if (!saves.is_array() || saves.empty()) continue;
    SavingRun s;
    s.run = &r;
    s.async = r.config.value("checkpoint", nlohmann::json::object()).value("async", false);
    std::vector<double> held, write;
    for (const auto& save : saves) {
      held.push_back(save.value("blocking_ms", 0.0));
      write.push_back(save.value("write_ms", 0.0));
      s.rank0_bytes = save.value("bytes_here", 0.0);
      s.total_bytes = save.value("total_bytes", 0.0);
      s.snapshot_bytes = save.value("snapshot_bytes", 0.0);
      if (save.contains("extra_bytes")) s.extra_bytes = save["extra_bytes"].get<double>();
    }
    s.saves = static_cast<int>(saves.size());
    s.held_ms = median_or_zero(held);
    s.write_ms = median_or_zero(write);
    s.model_rank0 = json_number_at(r.raw, {"prediction", "checkpoint", "bytes_this_rank"});
    s.model_total = json_number_at(r.raw, {"prediction", "checkpoint", "total_bytes"});
    s.model_write_ms = json_number_at(r.raw, {"prediction", "checkpoint", "write_ms"});
    s.model_writers = json_number_at(r.raw, {"prediction", "checkpoint", "writers"});
    out.push_back(s);
  }
  return out;
}

std::vector<LoadingRun> loading_runs(const Scenario& sc) {
  std::vector<LoadingRun> out;
  for (const RunResult& r : sc.runs) {
    const nlohmann::json from =
        r.raw.value("checkpoints", nlohmann::json::object()).value("resumed_from", nlohmann::json());
    if (!from.is_object()) continue;
    out.push_back(
        {&r, from.value("saved_by", std::string("?")), from.value("load_ms", 0.0), from.value("bytes_read", 0.0)});
  }
  return out;
}

std::string mib(double bytes) { return fmt_fixed(bytes / kMiB, 2); }
std::string mib_or_dash(const std::optional<double>& bytes) { return bytes ? mib(*bytes) : "–"; }

BarChart times_chart(const std::vector<SavingRun>& all) {
  BarChart c;
  c.title = "One checkpoint save";
  c.y_label = "time (ms)";
  c.series_names = {"training held", "write (rank 0)", "model: write at the disk rate"};
  c.values.assign(3, {});
  for (const SavingRun& s : all) {
    c.categories.push_back(s.run->name);
    c.values[0].push_back(s.held_ms);
    c.values[1].push_back(s.write_ms);
    c.values[2].push_back(s.model_write_ms.value_or(0.0));
  }
  if (std::all_of(c.values[2].begin(), c.values[2].end(), [](double v) { return v == 0; })) {
    c.series_names.pop_back();  // no disk rate in the profile: no model bars
    c.values.pop_back();
  }
  return c;
}

std::string saving_table(const std::vector<SavingRun>& all) {
  std::ostringstream h;
  h << "<table class=\"num\">\n<thead><tr><th>run</th><th>strategy</th><th>save</th><th>saves</th>"
       "<th>rank 0 writes (MiB)</th><th>model (MiB)</th><th>checkpoint (MiB)</th><th>model (MiB)</th>"
       "<th>writing ranks (model)</th><th>training held (ms)</th><th>write (ms)</th><th>model write (ms)</th>"
       "<th>hidden</th><th>snapshot (MiB)</th><th>extra memory, allocator (MiB)</th></tr></thead>\n<tbody>\n";
  for (const SavingRun& s : all) {
    const double hidden = s.async && s.write_ms > 0 ? std::max(0.0, 1.0 - s.held_ms / s.write_ms) : 0.0;
    h << "<tr><td>" << html_escape(s.run->name) << "</td><td>" << html_escape(s.run->strategy) << "</td><td>"
      << (s.async ? "async" : "blocking") << "</td><td>" << s.saves << "</td><td>" << mib(s.rank0_bytes) << "</td><td>"
      << mib_or_dash(s.model_rank0) << "</td><td>" << mib(s.total_bytes) << "</td><td>" << mib_or_dash(s.model_total)
      << "</td><td>" << (s.model_writers ? fmt_fixed(*s.model_writers, 0) : "–") << " of " << s.run->world_size
      << "</td><td>" << fmt_fixed(s.held_ms, 1) << "</td><td>" << fmt_fixed(s.write_ms, 1) << "</td><td>"
      << (s.model_write_ms ? fmt_fixed(*s.model_write_ms, 1) : "–") << "</td><td>"
      << (s.async ? fmt_fixed(100 * hidden, 0) + "%" : "–") << "</td><td>"
      << (s.snapshot_bytes > 0 ? mib(s.snapshot_bytes) : "0") << "</td><td>" << mib_or_dash(s.extra_bytes)
      << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
  return h.str();
}

std::string loading_table(const std::vector<LoadingRun>& all) {
  std::ostringstream h;
  h << "<table class=\"num\">\n<thead><tr><th>run</th><th>strategy, world</th><th>loaded a checkpoint of</th>"
       "<th>load (ms, rank 0)</th><th>read by rank 0 (MiB)</th></tr></thead>\n<tbody>\n";
  for (const LoadingRun& l : all)
    h << "<tr><td>" << html_escape(l.run->name) << "</td><td>" << html_escape(l.run->strategy) << ", "
      << l.run->world_size << "</td><td>" << html_escape(l.saved_by) << "</td><td>" << fmt_fixed(l.load_ms, 1)
      << "</td><td>" << mib(l.bytes_read) << "</td></tr>\n";
  h << "</tbody>\n</table>\n";
  return h.str();
}

std::string takeaways(const std::vector<SavingRun>& saves, const std::vector<LoadingRun>& loads) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  // Who writes what: the run whose rank 0 writes the largest share of its checkpoint against the smallest.
  const auto share = [](const SavingRun& s) { return s.total_bytes > 0 ? s.rank0_bytes / s.total_bytes : 0.0; };
  const auto most = std::max_element(saves.begin(), saves.end(),
                                     [&](const SavingRun& a, const SavingRun& b) { return share(a) < share(b); });
  const auto least = std::min_element(saves.begin(), saves.end(),
                                      [&](const SavingRun& a, const SavingRun& b) { return share(a) < share(b); });
  if (most != least && share(*most) > share(*least))
    h << "  <li><strong>Who writes.</strong> Rank 0 of " << html_escape(most->run->name) << " ("
      << html_escape(most->run->strategy) << ") writes " << fmt_fixed(100 * share(*most), 0) << "% of a "
      << mib(most->total_bytes) << " MiB checkpoint; rank 0 of " << html_escape(least->run->name) << " ("
      << html_escape(least->run->strategy) << ") writes " << fmt_fixed(100 * share(*least), 0)
      << "%. Replicas hold the same state, so one of them writes it; shards are written by their owners, in "
         "parallel.</li>\n";
  int exact = 0, modelled = 0;
  for (const SavingRun& s : saves)
    if (s.model_rank0 && s.model_total) {
      ++modelled;
      exact += (*s.model_rank0 == s.rank0_bytes && *s.model_total == s.total_bytes) ? 1 : 0;
    }
  if (modelled > 0)
    h << "  <li>The checkpoint model's bytes (analysis/cost/checkpoint_model.hpp) were exact, for rank 0 and the "
         "whole checkpoint, in "
      << exact << " of " << modelled << " runs.</li>\n";
  for (const SavingRun& s : saves) {
    if (!s.async || !(s.write_ms > 0)) continue;
    h << "  <li><strong>Async</strong> (" << html_escape(s.run->name) << "): training was held "
      << fmt_fixed(s.held_ms, 1) << " ms per save to copy " << mib(s.snapshot_bytes)
      << " MiB of state, while the write took " << fmt_fixed(s.write_ms, 1)
      << " ms on a background thread: " << fmt_fixed(100 * std::max(0.0, 1.0 - s.held_ms / s.write_ms), 0)
      << "% of the save hid behind training, paid for with the snapshot's memory.</li>\n";
  }
  for (const LoadingRun& l : loads)
    h << "  <li><strong>Resharding</strong> (" << html_escape(l.run->name) << "): " << html_escape(l.run->strategy)
      << " at world " << l.run->world_size << " loaded a checkpoint of " << html_escape(l.saved_by) << " in "
      << fmt_fixed(l.load_ms, 1) << " ms, rank 0 reading " << mib(l.bytes_read)
      << " MiB: each rank reads only the stored ranges that overlap what it holds.</li>\n";
  h << "</ul>\n";
  return h.str();
}

}  // namespace

std::string saving_part(SectionContext& ctx) {
  const std::vector<SavingRun> saves = saving_runs(ctx.scenario);
  const std::vector<LoadingRun> loads = loading_runs(ctx.scenario);
  if (saves.empty() && loads.empty()) return "";
  std::ostringstream h;
  h << "<h3>Training checkpoints: what each strategy writes, and what a save costs</h3>\n"
    << "<p class=\"desc\">What to look for: how much rank 0 writes under each strategy (one full copy for replicas, "
       "a shard for sharded strategies), the model's bytes against the measured, how long training is held by a "
       "blocking save and by an async one, and what a resharded load costs.</p>\n"
    << takeaways(saves, loads);
  if (!saves.empty()) {
    h << chart_part("checkpoint_save",
                    "Per save, median over the run's saves: the time training was held (blocking: the whole write; "
                    "async: the in-memory snapshot), the time rank 0's write took, and the checkpoint model's "
                    "write time at the profile's disk rate.",
                    [c = times_chart(saves)](const Scenario&) { return std::optional<Chart>(c); })(ctx);
    h << saving_table(saves);
  }
  if (!loads.empty()) h << loading_table(loads);
  return h.str();
}

}  // namespace dtlab::analysis
