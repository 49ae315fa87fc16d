// report_comm_bench.cpp: the report's collective benchmark section: every comm_bench.json found below the inputs
// -> bus bandwidth vs message size per op/algorithm with the point-to-point reference, and a table.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "analysis/results_instrument.hpp"

namespace dtlab::analysis {
namespace fs = std::filesystem;

namespace {

// 1 KiB, 64 MiB, 1.5 GiB: message sizes as nccl-tests users read them.
std::string fmt_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return fmt_fixed(bytes, bytes == std::floor(bytes) ? 0 : 1) + " " + units[u];
}

LineChart busbw_chart(const CommBench& b) {
  LineChart c;
  c.title = "Bus bandwidth vs message size (" + (b.backend.empty() ? std::string("?") : b.backend) + ", " +
            std::to_string(b.world_size) + " ranks)";
  c.x_label = "message size";
  c.y_label = "bus bandwidth (GB/s, out-of-place)";
  c.y_from_zero = true;
  c.log_x = true;
  c.x_format = "%.0b%BB";  // 1kiB ... 64MiB
  double min_x = INFINITY, max_x = 0;
  for (const auto& [name, points] : b.series) {
    Series s;
    s.name = name;
    for (const BenchPoint& p : points) {
      if (p.bytes <= 0) continue;  // no place on a log axis
      s.x.push_back(p.bytes);
      s.y.push_back(p.busbw_gbps);
      min_x = std::min(min_x, p.bytes);
      max_x = std::max(max_x, p.bytes);
    }
    c.series.push_back(std::move(s));
  }
  if (b.p2p_gbps && max_x > 0) {
    c.series.push_back({.name = "point-to-point loopback (reference)",
                        .x = {min_x, max_x},
                        .y = {*b.p2p_gbps, *b.p2p_gbps},
                        .in_every_panel = true});
  }
  return c;
}

std::string comm_bench_table(const CommBench& b) {
  constexpr double k64MiB = 64.0 * 1024 * 1024;
  std::ostringstream h;
  h << "<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>op (algorithm)</th>"
    << "<th class=\"num\">sizes</th><th class=\"num\">busbw at the largest size (GB/s)</th>"
    << "<th class=\"num\">busbw at 64 MiB (GB/s)</th><th class=\"num\">% of point-to-point</th>"
    << "<th class=\"num\">#wrong</th></tr></thead>\n<tbody>\n";
  for (const auto& [name, points] : b.series) {
    if (points.empty()) continue;
    const BenchPoint& largest = points.back();
    std::optional<double> at_64;
    for (const BenchPoint& p : points)
      if (p.bytes == k64MiB) at_64 = p.busbw_gbps;
    const double ref = at_64.value_or(largest.busbw_gbps);
    std::int64_t wrong = 0;
    for (const BenchPoint& p : points) wrong += p.wrong;
    h << "<tr><td><code>" << html_escape(name) << "</code></td><td class=\"num\">" << points.size()
      << "</td><td class=\"num\">" << html_escape(fmt_fixed(largest.busbw_gbps, 3)) << " <span class=\"range\">("
      << html_escape(fmt_bytes(largest.bytes)) << ")</span></td><td class=\"num\">"
      << (at_64 ? html_escape(fmt_fixed(*at_64, 3)) : "–") << "</td><td class=\"num\">"
      << (b.p2p_gbps && *b.p2p_gbps > 0 ? html_escape(fmt_fixed(100.0 * ref / *b.p2p_gbps, 0)) + "%" : "–")
      << "</td><td class=\"num\">" << wrong << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n<p class=\"muted\" style=\"font-size:12.5px;margin:4px 0 0\">";
  if (b.avg_busbw_gbps) h << "Avg bus bandwidth: " << html_escape(fmt_fixed(*b.avg_busbw_gbps, 3)) << " GB/s. ";
  if (b.p2p_gbps) {
    h << "Point-to-point loopback: " << html_escape(fmt_fixed(*b.p2p_gbps, 3)) << " GB/s"
      << (b.p2p_bytes ? " (" + html_escape(fmt_bytes(*b.p2p_bytes)) + ")" : "")
      << ", the physical reference; the target is an all-reduce bus bandwidth at 64 MiB of at least 80% of it. ";
  }
  h << "% of point-to-point uses the 64 MiB figure when measured, else the largest size. Source: <code>"
    << html_escape(b.path) << "</code></p>\n";
  return h.str();
}

}  // namespace

std::string comm_bench_section(const std::vector<std::string>& inputs, const fs::path& out_dir,
                               const std::string& out_dir_display, std::ostream& log,
                               std::vector<std::string>& problems) {
  const std::vector<CommBench> benches = load_comm_benches(inputs, log, problems);
  if (benches.empty()) return "";
  log << "collective benchmark: " << benches.size() << " file(s)\n";

  std::ostringstream h;
  h << "<section class=\"scenario\" id=\"scenario-comm-bench\">\n<h2>Collective benchmark<span class=\"id\">"
       "comm_bench</span></h2>\n<p class=\"desc\">Bus bandwidth of each collective against message size, measured "
       "by <code>dtlab comm-bench</code> in the manner of nccl-tests (busbw = algbw × the op's bus factor, so "
       "collectives compare with each other and with the link). The flat line is the point-to-point loopback "
       "bandwidth of the same run: what the wire can do.</p>\n";
  for (std::size_t i = 0; i < benches.size(); ++i) {
    Scenario synthetic;  // chart_part renders per "scenario"; this one only names the chart files
    synthetic.name = "comm_bench";
    synthetic.title = "Collective benchmark";
    SectionContext ctx{synthetic, i == 0 ? "comm_bench" : "comm_bench_" + std::to_string(i + 1),
                       out_dir,   out_dir_display,
                       log,       problems};
    const LineChart chart = busbw_chart(benches[i]);
    h << chart_part("busbw",
                    "Out-of-place bus bandwidth per op and algorithm (log-scale sizes) with the point-to-point "
                    "reference.",
                    [&chart](const Scenario&) -> std::optional<Chart> { return chart; })(ctx);
    h << comm_bench_table(benches[i]);
  }
  h << "</section>\n";
  return h.str();
}

}  // namespace dtlab::analysis
