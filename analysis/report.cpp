// report.cpp: the page skeleton (header, how-to, one section per scenario, footer) and chart_part; see report.hpp.
#include "analysis/report.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "analysis/course.hpp"
#include "analysis/html.hpp"

namespace dtlab::analysis {
namespace fs = std::filesystem;

namespace {

std::string slugify(const std::string& name) {
  std::string s;
  for (char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (keep)
      s += c;
    else if (c >= 'A' && c <= 'Z')
      s += static_cast<char>(c - 'A' + 'a');
    else
      s += '_';
  }
  return s.empty() ? "scenario" : s;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// "abc123" or "abc123, def456 (differ between runs)".
std::string distinct(const std::vector<Scenario>& scenarios, std::string RunResult::*field) {
  std::set<std::string> values;
  for (const Scenario& sc : scenarios) {
    for (const RunResult& r : sc.runs) values.insert(r.*field);
  }
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  if (values.size() > 1) out += " (differ between runs)";
  return out.empty() ? "–" : out;
}

const char* kHowToRead =
    "<p>Each section below is one <em>scenario</em>: a few runs of the same GPT model that differ in one thing "
    "(the distributed strategy, the precision, a bucket size, ...). <strong>Loss vs step</strong> should overlap "
    "for strategies that compute the same update (single, DDP, FSDP, ZeRO); a curve that departs points to a bug or "
    "a real numerical difference such as reduced precision. <strong>Step time vs step</strong> shows warm-up and "
    "noise; the table reports the median over the timed steps (after warm-up) with the min–max range, which is "
    "the number to compare. <strong>Tokens/s</strong> counts tokens processed by all ranks per second of wall "
    "time; <strong>TFLOPS</strong> is the model FLOP rate (6N + 12·L·h·s per token), and <strong>MFU</strong>, "
    "when present, relates it to the measured GEMM peak of this machine.</p>"
    "<p>Every chart is a gnuplot script with its data next to this page (the command under each chart redraws "
    "it), and every run lists the command that reproduces it.</p>";

std::string render_section(const Scenario& sc, const std::string& slug, const std::vector<SectionPart>& parts,
                           const fs::path& out_dir, const std::string& out_dir_display, std::ostream& log,
                           std::vector<std::string>& problems) {
  SectionContext ctx{sc, slug, out_dir, out_dir_display, log, problems};
  std::ostringstream h;
  h << "<section class=\"scenario\" id=\"scenario-" << html_escape(slug) << "\">\n<h2>";
  if (const std::optional<int> place = course_place(sc.name))  // its step in the course (course.cpp)
    h << "<span class=\"course-step\">Step " << *place << " · " << html_escape(course()[*place - 1].topic) << "</span>";
  h << html_escape(sc.title) << "<span class=\"id\">" << html_escape(sc.name) << "</span></h2>\n";
  for (const SectionPart& part : parts) h << part(ctx);
  h << "</section>\n";
  return h.str();
}

// The whole page; chart files go to `dir` (the staging dir), hints name `out_dir_display`.
std::string render_page(const std::vector<std::string>& inputs, const std::vector<Scenario>& scenarios,
                        const std::vector<SectionPart>& parts, const fs::path& dir, const std::string& out_dir_display,
                        std::ostream& log, std::vector<std::string>& problems) {
  std::size_t n_runs = 0;
  for (const Scenario& sc : scenarios) n_runs += sc.runs.size();
  std::set<std::string> used_slugs;
  std::vector<std::string> slugs;
  for (const Scenario& sc : scenarios) {
    std::string slug = slugify(sc.name);
    for (int k = 2; !used_slugs.insert(slug).second; ++k) slug = slugify(sc.name) + "_" + std::to_string(k);
    slugs.push_back(slug);
  }

  const std::string summary = strategy_summary_section(scenarios, dir, out_dir_display, log, problems);
  std::ostringstream body;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    log << "scenario " << scenarios[i].name << " (" << scenarios[i].runs.size() << " runs)\n";
    body << render_section(scenarios[i], slugs[i], parts, dir, out_dir_display, log, problems);
  }
  body << comm_bench_section(inputs, dir, out_dir_display, log, problems);  // not per scenario: results/calibration/
  body << comparison_section(inputs, log, problems);                        // `dtlab compare --json` files

  std::ostringstream page;
  page << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       << "<meta name=\"generator\" content=\"dtlab-report\">\n<title>dtlab report</title>\n<style>" << report_css()
       << "</style>\n</head>\n<body>\n<main>\n<header class=\"page\">\n<h1>dtlab report</h1>\n"
       << "<p class=\"meta\"><span>generated " << html_escape(utc_now()) << "</span><span>" << scenarios.size()
       << " scenario" << (scenarios.size() == 1 ? "" : "s") << ", " << n_runs << " run" << (n_runs == 1 ? "" : "s")
       << "</span></p>\n<p class=\"meta\"><span>git <code>" << html_escape(distinct(scenarios, &RunResult::git_sha))
       << "</code></span><span>torch " << html_escape(distinct(scenarios, &RunResult::torch_version))
       << "</span><span>host " << html_escape(distinct(scenarios, &RunResult::host)) << "</span><span>dtlab "
       << html_escape(distinct(scenarios, &RunResult::dtlab_version)) << "</span></p>\n";
  if (scenarios.size() > 1 || !summary.empty()) {
    page << "<nav class=\"toc\">";
    if (!summary.empty()) page << "<a href=\"#summary\">Every strategy against the baseline</a>";
    for (std::size_t i = 0; i < scenarios.size(); ++i) {
      const std::optional<int> place = course_place(scenarios[i].name);
      page << "<a href=\"#scenario-" << html_escape(slugs[i]) << "\">"
           << html_escape((place ? std::to_string(*place) + ". " + course()[*place - 1].topic + ": " : std::string()) +
                          scenarios[i].title)
           << "</a>";
    }
    page << "</nav>\n";
  }
  page << "</header>\n<section class=\"howto\">\n<h2>How to read this report</h2>\n" << kHowToRead << "\n</section>\n";
  if (!problems.empty()) {
    page << "<div class=\"problem\"><strong>" << problems.size() << " problem" << (problems.size() == 1 ? "" : "s")
         << " while rendering:</strong><ul>";
    for (const std::string& p : problems) page << "<li>" << html_escape(p) << "</li>";
    page << "</ul></div>\n";
  }
  page << summary << body.str() << "<footer>Generated by <code>dtlab-report</code> from ";
  for (std::size_t i = 0; i < inputs.size(); ++i)
    page << (i ? ", " : "") << "<code>" << html_escape(inputs[i]) << "</code>";
  page << ". Charts: gnuplot; each one's SVG, PNG, script and data next to this "
          "page.</footer>\n</main>\n</body>\n</html>\n";
  return page.str();
}

// A fresh hidden dir inside `out` to render into (same file system, so publishing is a rename), or nullopt with
// the reason in `error` when `out` cannot be written.
std::optional<fs::path> make_staging_dir(const fs::path& out, std::string& error) {
  std::string name = (out / ".dtlab-report-XXXXXX").string();
  if (::mkdtemp(name.data()) == nullptr) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  return fs::path(name);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw AnalysisError("cannot write " + p.string());
}

// Moves every file of the finished report from `staging` into `out`, index.html last, so a report dir holds
// either its old index.html or the new one, never a half-written page. Throws AnalysisError naming the file.
void publish(const fs::path& staging, const fs::path& out) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(staging)) files.push_back(entry.path());
  std::stable_partition(files.begin(), files.end(), [](const fs::path& p) { return p.filename() != "index.html"; });
  for (const fs::path& from : files) {
    std::error_code ec;
    fs::rename(from, out / from.filename(), ec);
    if (ec)
      throw AnalysisError("cannot move " + from.string() + " to " + (out / from.filename()).string() + ": " +
                          ec.message());
  }
}

}  // namespace

SectionPart chart_part(std::string kind, std::string caption, ChartBuilder build) {
  return [kind = std::move(kind), caption = std::move(caption), build = std::move(build)](SectionContext& ctx) {
    std::optional<Chart> chart = build(ctx.scenario);
    if (!chart) return std::string();
    const std::string id = kind + "_" + ctx.slug;
    std::string title;
    ChartFiles files;
    std::string error;
    try {
      std::visit(
          [&](auto& c) {
            c.id = id;
            title = c.title;
            files = write_chart(c, ctx.out_dir);
          },
          *chart);
      run_gnuplot(files, ctx.out_dir, ctx.out_dir_display);
      ctx.log << "  chart " << id << ": " << files.svg.filename().string() << ", " << files.png.filename().string()
              << "\n";
    } catch (const AnalysisError& e) {
      error = e.what();
      ctx.log << "error: " << error << "\n";
      ctx.problems.push_back(error);
    }
    const std::string rerun = "cd " + ctx.out_dir_display + " && gnuplot " + id + ".gp";
    std::ostringstream h;
    h << "<figure class=\"chart\" id=\"chart-" << html_escape(id) << "\">\n";
    if (error.empty()) {
      // Linked, not inlined: a full report has about 170 charts, and inlined they made index.html 12.5 MB; the
      // browser fetches each SVG as it scrolls into view, in the box gnuplot drew it at (plot.hpp).
      h << "<img class=\"chart-svg\" src=\"" << html_escape(id) << ".svg\" alt=\"" << html_escape(title)
        << "\" width=\"" << files.svg_width << "\" height=\"" << files.svg_height << "\" loading=\"lazy\">\n";
    } else {
      h << "<p class=\"problem\">Chart not rendered: " << html_escape(error) << "</p>\n";
    }
    h << "<figcaption><span class=\"what\">" << html_escape(caption) << "</span>"
      << "<a href=\"" << html_escape(id) << ".png\">PNG</a>"
      << "<a href=\"" << html_escape(id) << ".gp\">gnuplot script</a>"
      << "<a href=\"" << html_escape(id) << ".dat\">data</a>"
      << "<code>" << html_escape(rerun) << "</code></figcaption>\n</figure>\n";
    return h.str();
  };
}

int render_report(const std::vector<std::string>& inputs, const std::string& out_dir, std::ostream& log) {
  return render_report(inputs, out_dir, log, default_section_parts());
}

int render_report(const std::vector<std::string>& inputs, const std::string& out_dir, std::ostream& log,
                  const std::vector<SectionPart>& parts) {
  std::vector<Scenario> scenarios;
  try {
    scenarios = in_course_order(discover(inputs));  // the learning order of course.cpp, not the file names
  } catch (const AnalysisError& e) {
    log << "error: " << e.what() << "\n";
    return 1;
  }
  const fs::path out(out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out)) {
    log << "error: cannot create report dir " << out_dir << ": "
        << (ec ? ec.message() : std::string("exists and is not a directory"))
        << " (-o must name a directory that can be created and written)\n";
    return 1;
  }
  std::string error;
  const std::optional<fs::path> staging = make_staging_dir(out, error);
  if (!staging) {
    log << "error: cannot write into report dir " << out_dir << ": " << error << "\n";
    return 1;
  }

  std::size_t n_runs = 0;
  for (const Scenario& sc : scenarios) n_runs += sc.runs.size();
  log << "report: " << scenarios.size() << " scenario(s), " << n_runs << " run(s) -> " << out_dir << "/index.html\n";

  std::vector<std::string> problems;
  std::string page;
  try {
    page = render_page(inputs, scenarios, parts, *staging, out_dir, log, problems);
  } catch (const std::exception& e) {  // a part's bug, not a problem with one input: nothing is published
    log << "error: rendering the report failed: " << e.what() << "; " << out_dir << " is left as it was\n";
    fs::remove_all(*staging, ec);
    return 1;
  }
  try {
    write_file(*staging / "index.html", page);
    publish(*staging, out);
  } catch (const std::exception& e) {  // AnalysisError, or the file system's own error listing the staging dir
    log << "error: " << e.what() << "\n";
    fs::remove_all(*staging, ec);
    return 1;
  }
  fs::remove_all(*staging, ec);
  log << "wrote " << (out / "index.html").string()
      << (problems.empty() ? "" : " (with " + std::to_string(problems.size()) + " problem(s), see above)") << "\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace dtlab::analysis
