// html.hpp: the few HTML helpers the report needs -- escaping, number formatting, SVG inlining, the stylesheet.
//
// Everything read from files (names, titles, notes, commands, config values) goes through html_escape()
// before it reaches the page; the fmt_* helpers return plain text that still needs escaping (they only
// ever produce digits, signs, separators and units, so escaping is a no-op, but callers should not rely on it).
#pragma once

#include <cstdint>
#include <string>

namespace dtlab::analysis {

// Escapes & < > " ' so the result is safe in element content and in quoted attribute values.
std::string html_escape(const std::string& text);

// Grouped digits with a narrow no-break space, as in "9 950" (the style of the step lines).
std::string fmt_grouped(double value, int decimals = 0);
// Fixed decimals; "–" for NaN.
std::string fmt_fixed(double value, int decimals);
// The change from `from` to `to` in whole percent with its sign, as in "+12%" or "−7%"; "–" when from <= 0.
std::string percent_change(double from, double to);
// Parameter count with SI suffix: 4849920 -> "4.85 M".
std::string fmt_params(std::int64_t params);

// The report's stylesheet (inlined into <style>; no external resources so the page works offline).
const char* report_css();

}  // namespace dtlab::analysis
