// report_offload.cpp: the "CPU offload" part of a scenario section — runs named <series>@<label> whose resolved
// configs differ only in parallel.offload: each rank's memory split into the device side and offload's host buffers
// (measured and planned), the step time beside the model's, a table, and takeaways computed from the pairs
// (torch-free).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct OffloadPoint {
  const RunResult* run = nullptr;
  double device_peak = 0;                 // largest_rank_device_side_peak (bytes)
  double host = 0;                        // rank 0's bytes counted as host memory after the last step
  std::optional<double> planned_host;     // memory.host_bytes: the strategy's own StateBytes::host
  std::optional<double> model_device;     // prediction.memory_bytes.device_peak
  std::optional<double> model_ms;         // prediction.step_ms
  std::optional<double> model_copies_ms;  // prediction.offload_ms
};

struct OffloadPair {
  std::string name;  // the series (the strategy's run name)
  OffloadPoint off, on;
};

bool offloads(const RunResult& r) {
  const nlohmann::json parallel = r.config.value("parallel", nlohmann::json::object());
  return parallel.value("offload", false);
}

// The config with parallel.offload taken out: the twin of a run is the one whose rest is equal.
nlohmann::json without_offload(const RunResult& r) {
  nlohmann::json c = r.config;
  if (c.contains("parallel") && c["parallel"].is_object()) c["parallel"].erase("offload");
  return c;
}

OffloadPoint point_of(const RunResult& r) {
  OffloadPoint p;
  p.run = &r;
  p.device_peak = largest_rank_device_side_peak(r);
  if (r.raw.contains("memory") && r.raw["memory"].is_object()) {
    const nlohmann::json& memory = r.raw["memory"];
    if (memory.contains("host_measured") && memory["host_measured"].is_object())
      for (const auto& [category, counts] : memory["host_measured"].items())
        p.host += counts.is_object() ? counts.value("current_bytes", 0.0) : 0.0;
  }
  p.planned_host = json_number_at(r.raw, {"memory", "host_bytes"});
  p.model_device = json_number_at(r.raw, {"prediction", "memory_bytes", "device_peak"});
  p.model_ms = json_number_at(r.raw, {"prediction", "step_ms"});
  p.model_copies_ms = json_number_at(r.raw, {"prediction", "offload_ms"});
  return p;
}

// Pairs of runs of one series, one without offload and one with, equal in everything else; in the order their
// series first appear.
std::vector<OffloadPair> offload_pairs(const Scenario& sc) {
  std::vector<OffloadPair> out;
  std::map<std::string, std::pair<const RunResult*, const RunResult*>> by_series;  // off, on
  std::vector<std::string> order;
  for (const RunResult& r : sc.runs) {
    const size_t at = r.name.find('@');
    if (at == std::string::npos || !r.memory || !(r.step_ms_median > 0)) continue;
    const std::string name = r.name.substr(0, at);
    if (!by_series.count(name)) order.push_back(name);
    auto& slot = by_series[name];
    (offloads(r) ? slot.second : slot.first) = &r;
  }
  for (const std::string& name : order) {
    const auto [off, on] = by_series[name];
    if (off == nullptr || on == nullptr || without_offload(*off) != without_offload(*on) ||
        off->world_size != on->world_size)
      continue;
    out.push_back({name, point_of(*off), point_of(*on)});
  }
  return out;
}

std::string mib_or_dash(const std::optional<double>& bytes) { return bytes ? fmt_fixed(*bytes / kMiB, 1) : "–"; }

BarChart memory_chart(const std::vector<OffloadPair>& all) {
  BarChart c;
  c.title = "Memory per rank: device side and host buffers";
  c.y_label = "MiB per rank";
  c.stacked = true;
  c.series_names = {"device side (peak)", "host buffers (offload)"};
  c.values.assign(2, {});
  for (const OffloadPair& p : all)
    for (const OffloadPoint* point : {&p.off, &p.on}) {
      c.categories.push_back(p.name + (point == &p.on ? " +offload" : ""));
      c.values[0].push_back(point->device_peak / kMiB);
      c.values[1].push_back(point->host / kMiB);
    }
  return c;
}

BarChart time_chart(const std::vector<OffloadPair>& all) {
  BarChart c;
  c.title = "Step time without and with offload";
  c.y_label = "median step time (ms)";
  c.series_names = {"measured", "model"};
  c.values.assign(2, {});
  for (const OffloadPair& p : all)
    for (const OffloadPoint* point : {&p.off, &p.on}) {
      c.categories.push_back(p.name + (point == &p.on ? " +offload" : ""));
      c.values[0].push_back(point->run->step_ms_median);
      c.values[1].push_back(point->model_ms.value_or(0));
    }
  return c;
}

std::string table(const std::vector<OffloadPair>& all) {
  std::ostringstream h;
  h << "<table class=\"num\">\n<thead><tr><th>strategy</th><th>offload</th><th>device-side peak (MiB)</th>"
       "<th>model (MiB)</th><th>host buffers (MiB)</th><th>plan (MiB)</th><th>step (ms)</th><th>model (ms)</th>"
       "<th>model's copies (ms)</th></tr></thead>\n<tbody>\n";
  for (const OffloadPair& p : all)
    for (const OffloadPoint* point : {&p.off, &p.on}) {
      h << "<tr><td>" << html_escape(p.name) << "</td><td>" << (point == &p.on ? "on" : "off") << "</td><td>"
        << fmt_fixed(point->device_peak / kMiB, 1) << "</td><td>" << mib_or_dash(point->model_device) << "</td><td>"
        << fmt_fixed(point->host / kMiB, 1) << "</td><td>" << mib_or_dash(point->planned_host) << "</td><td>"
        << fmt_fixed(point->run->step_ms_median, 0) << "</td><td>"
        << (point->model_ms ? fmt_fixed(*point->model_ms, 0) : "–") << "</td><td>"
        << (point->model_copies_ms ? fmt_fixed(*point->model_copies_ms, 1) : "–") << "</td></tr>\n";
    }
  h << "</tbody>\n</table>\n";
  return h.str();
}

std::string takeaways(const std::vector<OffloadPair>& all) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  const OffloadPair* most = nullptr;  // the largest relative fall of the device-side peak
  auto fall = [](const OffloadPair& p) { return p.off.device_peak > 0 ? 1 - p.on.device_peak / p.off.device_peak : 0; };
  for (const OffloadPair& p : all) {
    h << "  <li><strong>" << html_escape(p.name) << "</strong>: offload keeps " << fmt_fixed(p.on.host / kMiB, 1)
      << " MiB per rank in host buffers; the device-side peak goes from " << fmt_fixed(p.off.device_peak / kMiB, 1)
      << " to " << fmt_fixed(p.on.device_peak / kMiB, 1) << " MiB ("
      << percent_change(p.off.device_peak, p.on.device_peak) << ") and the step from "
      << fmt_fixed(p.off.run->step_ms_median, 0) << " to " << fmt_fixed(p.on.run->step_ms_median, 0) << " ms ("
      << percent_change(p.off.run->step_ms_median, p.on.run->step_ms_median) << ")";
    if (p.on.model_copies_ms) h << "; the model adds " << fmt_fixed(*p.on.model_copies_ms, 1) << " ms of copies";
    h << ".";
    if (p.on.device_peak + p.on.host < p.off.device_peak + p.off.host)
      h << " In all it holds " << fmt_fixed((p.off.device_peak + p.off.host - p.on.device_peak - p.on.host) / kMiB, 1)
        << " MiB less than without offload.";
    else if (p.on.device_peak + p.on.host > 1.02 * (p.off.device_peak + p.off.host))
      h << " In all it holds " << fmt_fixed((p.on.device_peak + p.on.host - p.off.device_peak - p.off.host) / kMiB, 1)
        << " MiB more than without: the device keeps a compute copy of what the host holds.";
    h << "</li>\n";
    if (most == nullptr || fall(p) > fall(*most)) most = &p;
  }
  if (most != nullptr && all.size() >= 2)
    h << "  <li>Offload takes the largest share of the device-side peak off for <strong>" << html_escape(most->name)
      << "</strong> (" << fmt_fixed(100 * fall(*most), 0)
      << "%): the more a strategy shards parameters and gradients, the larger the part of what remains on the device "
         "that offload can move; strategies that keep full parameters and gradients on the device keep them.</li>\n";
  int exact = 0, planned = 0;
  for (const OffloadPair& p : all)
    if (p.on.planned_host) {
      ++planned;
      exact += std::fabs(*p.on.planned_host - p.on.host) < 0.5 ? 1 : 0;
    }
  if (planned > 0)
    h << "  <li>The host bytes measured after the last step equal the strategy's plan in " << exact << " of " << planned
      << " offload runs.</li>\n";
  h << "  <li>On a machine without a GPU the copies are host-to-host memcpy and the host optimizer runs on the cores "
       "that train: the memory split is what a GPU run has, the time is not a PCIe transfer's.</li>\n";
  h << "</ul>\n";
  return h.str();
}

}  // namespace

std::string offload_part(SectionContext& ctx) {
  const std::vector<OffloadPair> all = offload_pairs(ctx.scenario);
  if (all.empty()) return "";
  std::ostringstream h;
  h << "<h3>CPU offload: what moves to the host, and what it costs</h3>\n"
    << "<p class=\"desc\">Each strategy without and with parallel.offload. What to look for: how far the device-side "
       "peak falls (the bytes a GPU would need), the host buffers that take them, and the step time beside the "
       "model's copies.</p>\n"
    << takeaways(all);
  h << chart_part("offload_memory",
                  "Largest device-side peak of any rank and rank 0's host buffers (MiB), stacked, without and with "
                  "offload.",
                  [c = memory_chart(all)](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  h << chart_part("offload_time", "Median step time without and with offload: measured and the cost model's.",
                  [c = time_chart(all)](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  h << table(all);
  return h.str();
}

}  // namespace dtlab::analysis
