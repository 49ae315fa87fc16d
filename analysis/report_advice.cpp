// report_advice.cpp: the "Advice, verified" part of a scenario section, for a `dtlab advise --verify` directory (its
// advice.json, docs/advisor.md): whether the advice held (the predicted top-1 measured within 5% of the best of the
// verified top K), whether each run fit or ran out of memory as predicted, the advisor's explanation, and a table of
// predicted against measured step time and peak per run (torch-free).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string verification_table(const nlohmann::json& runs) {
  std::ostringstream h;
  h << "<table class=\"num\">\n<thead><tr><th>run</th><th>settings</th><th>predicted</th><th>measured</th>"
       "<th>step (ms), model</th><th>step (ms), measured</th><th>peak (MiB), model</th>"
       "<th>peak (MiB), measured</th></tr></thead>\n<tbody>\n";
  for (const auto& r : runs) {
    const bool completed = r.value("status", std::string()) == "completed";
    h << "<tr><td>" << html_escape(r.value("name", std::string())) << "</td><td>"
      << html_escape(r.value("description", std::string())) << "</td><td>"
      << (r.value("predicted_fits", false) ? "fits" : "out of memory") << "</td><td>"
      << html_escape(r.value("status", std::string()))
      << (r.value("feasibility_right", false) ? "" : " (not as predicted)") << "</td><td>"
      << fmt_fixed(r.value("predicted_step_ms", 0.0), 1) << "</td><td>"
      << (completed ? fmt_fixed(r.value("measured_step_ms", 0.0), 1) : "–") << "</td><td>"
      << fmt_fixed(r.value("predicted_peak_bytes", 0.0) / kMiB, 2) << "</td><td>"
      << fmt_fixed(r.value("measured_peak_bytes", 0.0) / kMiB, 2) << (completed ? "" : " (in use + refused)")
      << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
  return h.str();
}

}  // namespace

std::string advice_part(SectionContext& ctx) {
  const std::filesystem::path file = std::filesystem::path(ctx.scenario.dir) / "advice.json";
  std::ifstream in(file);
  if (!in) return "";
  const nlohmann::json advice = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!advice.is_object() || !advice.contains("verification")) return "";
  const nlohmann::json& v = advice["verification"];
  const nlohmann::json& runs = v.value("runs", nlohmann::json::array());
  std::ostringstream h;
  h << "<h3>Advice, verified: the predicted best configurations, run under the budget</h3>\n"
    << "<p class=\"desc\">What to look for: whether the configuration the cost models ranked first measured within "
       "5% of the best of those run, and whether every run fit or stopped out of memory as predicted.</p>\n"
    << "<ul class=\"takeaways\">\n";
  if (!runs.empty() && v.contains("measured_best") && v["measured_best"].is_number()) {
    const auto best = runs.at(v["measured_best"].get<size_t>() - 1);
    h << "  <li><strong>" << (v.value("held", false) ? "The advice held." : "The advice did not hold.")
      << "</strong> The predicted top-1 (" << html_escape(runs[0].value("description", std::string())) << ") measured "
      << fmt_fixed(runs[0].value("measured_step_ms", 0.0), 1) << " ms per step; the best run ("
      << html_escape(best.value("name", std::string())) << ") " << fmt_fixed(best.value("measured_step_ms", 0.0), 1)
      << " ms.</li>\n";
  }
  h << "  <li><strong>Feasibility.</strong> " << v.value("feasibility_right", 0) << " of "
    << v.value("feasibility_checked", 0) << " runs fit or ran out of memory as predicted under a budget of "
    << fmt_fixed(advice.value("budget_bytes", 0.0) / kMiB, 1) << " MiB per rank.</li>\n";
  for (const auto& line : advice.value("explanation", nlohmann::json::array()))
    h << "  <li>" << html_escape(line.get<std::string>()) << "</li>\n";
  h << "</ul>\n" << verification_table(runs);
  return h.str();
}

}  // namespace dtlab::analysis
