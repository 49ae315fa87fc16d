// html.cpp: escaping, number formatting, SVG inlining and the stylesheet; see html.hpp.
#include "analysis/html.hpp"

#include <cmath>
#include <cstdio>

namespace dtlab::analysis {

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fmt_fixed(double value, int decimals) {
  if (std::isnan(value)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string percent_change(double from, double to) {
  if (!(from > 0)) return "–";
  const double pct = 100.0 * (to - from) / from;
  return (pct >= 0 ? "+" : "−") + fmt_fixed(std::fabs(pct), 0) + "%";
}

std::string fmt_grouped(double value, int decimals) {
  if (std::isnan(value)) return "–";
  std::string s = fmt_fixed(std::fabs(value), decimals);
  const std::size_t dot = s.find('.');
  std::string int_part = s.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : s.substr(dot);
  std::string grouped;
  const std::string sep = "\u202f";  // narrow no-break space
  for (std::size_t i = 0; i < int_part.size(); ++i) {
    if (i > 0 && (int_part.size() - i) % 3 == 0) grouped += sep;
    grouped += int_part[i];
  }
  return (value < 0 ? "-" : "") + grouped + frac;
}

std::string fmt_params(std::int64_t params) {
  const double p = static_cast<double>(params);
  if (p >= 1e9) return fmt_fixed(p / 1e9, 2) + " B";
  if (p >= 1e6) return fmt_fixed(p / 1e6, 2) + " M";
  if (p >= 1e3) return fmt_fixed(p / 1e3, 1) + " k";
  return std::to_string(params);
}

const char* report_css() {
  return R"css(
:root { --fg:#1f2328; --muted:#59636e; --line:#d8dee4; --bg:#ffffff; --panel:#f6f8fa; --accent:#4e79a7; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
       font: 15px/1.55 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 0 28px 48px; }
header.page { border-bottom: 1px solid var(--line); padding: 28px 0 16px; margin-bottom: 8px; }
header.page h1 { margin: 0 0 6px; font-size: 28px; letter-spacing: -0.01em; }
.meta { color: var(--muted); font-size: 13.5px; margin: 0; }
.meta span + span::before { content: "·"; margin: 0 8px; color: #9aa4ae; }
.meta code { font-size: 12.5px; }
nav.toc { font-size: 14px; margin: 14px 0 0; }
nav.toc a { margin-right: 14px; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
h2 { font-size: 22px; margin: 40px 0 4px; padding-top: 8px; border-top: 1px solid var(--line); }
h2 .id { font: 500 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: var(--muted);
         margin-left: 10px; vertical-align: middle; }
h2 .course-step { display: block; font-size: 13px; font-weight: 500; color: var(--muted); letter-spacing: .04em;
                  text-transform: uppercase; margin-bottom: 2px; }
h3 { font-size: 16px; margin: 26px 0 8px; }
.howto { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 4px 18px 8px;
         margin-top: 20px; font-size: 14px; }
.howto h2 { border: 0; margin: 10px 0 4px; font-size: 16px; padding: 0; }
.howto p { margin: 6px 0; }
.desc { margin: 6px 0 10px; }
ul.notes { margin: 6px 0 10px; padding-left: 20px; color: #333; }
.callout { border-left: 4px solid #edc948; background: #fffbea; padding: 8px 14px; margin: 12px 0; font-size: 14px; }
.problem { border-left: 4px solid #e15759; background: #fdf0f0; padding: 8px 14px; margin: 12px 0; font-size: 14px; }
figure.chart { margin: 18px 0 22px; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px 8px; }
figure.chart svg, figure.chart img.chart-svg { width: 100%; height: auto; display: block; }
figure.chart figcaption { font-size: 13px; color: var(--muted); margin-top: 6px;
                          display: flex; flex-wrap: wrap; gap: 4px 14px; align-items: baseline; }
figure.chart figcaption .what { color: var(--fg); flex-basis: 100%; }
table.runs { border-collapse: collapse; width: 100%; font-size: 13.5px; margin: 8px 0 4px; }
table.runs th, table.runs td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left;
                               white-space: nowrap; }
table.runs th { background: var(--panel); font-weight: 600; border-bottom: 2px solid var(--line); }
table.runs td.num, table.runs th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.runs tbody tr:hover { background: #fafbfc; }
.range { color: var(--muted); font-size: 12px; }
.table-wrap { overflow-x: auto; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
figcaption code { background: var(--panel); padding: 1px 6px; border-radius: 4px; }
dl.repro dt { font-weight: 600; margin-top: 10px; font-size: 14px; }
dl.repro dd { margin: 4px 0 0; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px;
      margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
footer { color: var(--muted); font-size: 12.5px; border-top: 1px solid var(--line); margin-top: 40px;
         padding-top: 12px; }
)css";
}

}  // namespace dtlab::analysis
