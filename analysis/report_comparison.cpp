// report_comparison.cpp: the report's comparison section: every comparison.json (written by `dtlab compare --json`)
// found below the inputs, as one table per compared run with the verdict per metric (torch-free).
#include <fstream>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "analysis/results_instrument.hpp"

namespace dtlab::analysis {

std::string comparison_section(const std::vector<std::string>& inputs, std::ostream& log,
                               std::vector<std::string>& problems) {
  std::ostringstream h;
  for (const std::filesystem::path& file : find_files_named(inputs, "comparison.json")) {
    std::ifstream in(file);
    const nlohmann::json c = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!c.is_object() || !c.contains("runs") || !c["runs"].is_array()) {
      problems.push_back(file.string() + ": not a `dtlab compare --json` document (no \"runs\" array)");
      continue;
    }
    log << "comparison: " << file.string() << " (" << c["runs"].size() << " runs)\n";
    h << "<section class=\"scenario\" id=\"comparison\">\n<h2>Comparison<span class=\"id\">"
      << html_escape(file.string()) << "</span></h2>\n<p class=\"desc\">A = <code>"
      << html_escape(c.value("a", std::string("?"))) << "</code>, B = <code>"
      << html_escape(c.value("b", std::string("?")))
      << "</code>. Ratio = median(B) / median(A) over the measured steps; the 95% interval is a bootstrap over "
         "steps; a change counts only when the whole interval lies beyond "
      << fmt_fixed(c.value("threshold_pct", 0.0), 1) << "%.</p>\n";
    for (const auto& run : c["runs"]) {
      h << "<h3>" << html_escape(run.value("run", std::string())) << "</h3>\n<table class=\"num\">\n<thead><tr>"
        << "<th>metric</th><th>median A</th><th>median B</th><th>B/A</th><th>95% interval</th><th>verdict</th>"
        << "</tr></thead>\n<tbody>\n";
      for (const auto& m : run.value("metrics", nlohmann::json::array())) {
        const bool has_ci = m.contains("ci95") && m["ci95"].is_array() && m["ci95"].size() == 2;
        const std::string verdict = m.value("verdict", std::string());
        h << "<tr><td>" << html_escape(m.value("metric", std::string())) << "</td><td>"
          << fmt_fixed(m.value("median_a", 0.0), 2) << "</td><td>" << fmt_fixed(m.value("median_b", 0.0), 2)
          << "</td><td>" << fmt_fixed(m.value("ratio", 0.0), 3) << "</td><td>"
          << (has_ci ? fmt_fixed(m["ci95"][0].get<double>(), 3) + " – " + fmt_fixed(m["ci95"][1].get<double>(), 3)
                     : "–")
          << "</td><td>" << (verdict == "worse" ? "<strong>" : "")
          << html_escape(m.value("verdict_text", std::string())) << (verdict == "worse" ? "</strong>" : "")
          << "</td></tr>\n";
      }
      h << "</tbody>\n</table>\n";
    }
    h << "</section>\n";
  }
  return h.str();
}

}  // namespace dtlab::analysis
