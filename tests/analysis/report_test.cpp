// report_test.cpp: golden-style checks of index.html rendered from the committed fixtures (by pattern, not
// bytes; what the page must show is read from the fixture files: real runs, whose timings change), HTML escaping
// of file content, extension by parts, and failure modes: malformed result.json, a render that fails (an earlier
// report in the output dir survives both), an output dir that cannot be written.
#include "analysis/report.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/plot.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using testing::contains;
using testing::count;
using testing::read_text;
using testing::TempDir;

bool png_magic(const fs::path& p) { return read_text(p).rfind("\x89PNG\r\n\x1a\n", 0) == 0; }

// Restores PATH when it goes out of scope.
class ScopedPath {
 public:
  explicit ScopedPath(const char* value) : old_(current()) { ::setenv("PATH", value, 1); }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  static std::string current() {
    const char* path = std::getenv("PATH");
    return path ? path : "";
  }
  std::string old_;
};

// "a" or "a, b (differ between runs)": the report header's summary of one context field over every run.
std::string header_values(const std::vector<Scenario>& scenarios, std::string RunResult::*field) {
  std::set<std::string> values;
  for (const Scenario& sc : scenarios)
    for (const RunResult& r : sc.runs) values.insert(r.*field);
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  return values.size() > 1 ? out + " (differ between runs)" : out;
}

TEST(Report, GoldenFromFixtures) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  const fs::path out = tmp.path() / "report";
  std::ostringstream log;
  ASSERT_EQ(render_report({testing::fixtures_dir() + "/results"}, out.string(), log), 0) << log.str();
  const std::string html = read_text(out / "index.html");
  // what the page must show, read from the fixture files (real runs: sha, host and timings change with them)
  const std::vector<Scenario> scenarios = discover({testing::fixtures_dir() + "/results"});
  ASSERT_EQ(scenarios.size(), 2u);

  // page skeleton
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(contains(html, "<h1>dtlab report</h1>"));
  EXPECT_TRUE(contains(html, "How to read this report"));
  EXPECT_TRUE(contains(html, "git <code>" + html_escape(header_values(scenarios, &RunResult::git_sha)) + "</code>"));
  EXPECT_TRUE(contains(html, "torch " + html_escape(header_values(scenarios, &RunResult::torch_version))));
  EXPECT_TRUE(contains(html, "host " + html_escape(header_values(scenarios, &RunResult::host))));
  EXPECT_TRUE(std::regex_search(html, std::regex("generated \\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2} UTC")));
  EXPECT_FALSE(contains(html, "<link ")) << "self-contained: no external stylesheets";
  EXPECT_FALSE(contains(html, "<script")) << "no scripts";

  // one section per scenario, with title, description and notes from scenario.json
  for (const Scenario& sc : scenarios) {
    EXPECT_TRUE(contains(html, "<section class=\"scenario\" id=\"scenario-" + sc.name + "\">")) << sc.name;
    EXPECT_TRUE(contains(html, html_escape(sc.title))) << sc.name;
    EXPECT_TRUE(contains(html, html_escape(sc.description))) << sc.name;
    for (const std::string& note : sc.notes) EXPECT_TRUE(contains(html, "<li>" + html_escape(note) + "</li>")) << note;
  }

  // every chart is its SVG, linked (index.html stays small) and next to the page; loss, step time and throughput per
  // scenario, PNG linked, rerun command shown
  EXPECT_EQ(count(html, "<img class=\"chart-svg\""), count(html, "<figure class=\"chart\""));
  EXPECT_EQ(count(html, "<svg"), 0u) << "no chart inlined";
  for (const char* kind : {"loss", "step_time", "throughput"}) {
    for (const char* sc : {"baseline", "mixed_precision"}) {
      const std::string id = std::string(kind) + "_" + sc;
      EXPECT_TRUE(contains(html, "id=\"chart-" + id + "\"")) << id;
      EXPECT_TRUE(contains(html, "href=\"" + id + ".png\"")) << id;
      EXPECT_TRUE(contains(html, "cd " + out.string() + " &amp;&amp; gnuplot " + id + ".gp")) << id;
      EXPECT_TRUE(png_magic(out / (id + ".png"))) << id;
      EXPECT_TRUE(fs::exists(out / (id + ".gp"))) << id;
      EXPECT_TRUE(fs::exists(out / (id + ".svg"))) << id;
      EXPECT_TRUE(fs::exists(out / (id + ".dat"))) << id;
    }
  }

  // the runs table, one per scenario: per run its strategy, world size, preset, params, and the median (min-max)
  // step time that result.json holds; a precision column where a run is not fp32; the reproduce command
  EXPECT_EQ(count(html, "<h3>Runs</h3>"), 2u);
  EXPECT_TRUE(contains(html, "<th class=\"num\">MFU %</th>"));
  int world_2 = 0;
  for (const Scenario& sc : scenarios) {
    std::set<std::string> dtypes;  // the column shows when a run is not fp32
    for (const RunResult& r : sc.runs) dtypes.insert(r.param_dtype());
    const bool precision_column = dtypes.size() > 1 || !dtypes.count("fp32");
    for (const RunResult& r : sc.runs) {
      ASSERT_TRUE(r.params >= 1000 && r.params < 1000000) << r.name << ": the tiny preset, shown in k";
      world_2 += r.world_size == 2;
      EXPECT_TRUE(contains(html, "<tr><td>" + r.name + "</td><td><code>" + r.strategy +
                                     "</code></td><td class=\"num\">" + std::to_string(r.world_size) + "</td><td>" +
                                     r.preset + "</td>" + (precision_column ? "<td>" + r.param_dtype() + "</td>" : "") +
                                     "<td class=\"num\">" + testing::fixed(r.params / 1e3, 1) + " k</td>"))
          << sc.name << "/" << r.name;
      EXPECT_TRUE(contains(html, "<td class=\"num\">" + testing::fixed(r.step_ms_median, 1) +
                                     " <span class=\"range\">(" + testing::fixed(r.step_ms_min, 1) + "–" +
                                     testing::fixed(r.step_ms_max, 1) + ")</span></td>"))
          << sc.name << "/" << r.name;
      EXPECT_TRUE(contains(html, "<pre><code>" + html_escape(r.command) + "</code></pre>")) << sc.name << "/" << r.name;
    }
  }
  EXPECT_EQ(world_2, 1) << "baseline has one DDP run on two ranks";
  EXPECT_TRUE(std::regex_search(html, std::regex("<tr><td>bf16</td>.*<td>bf16</td>")))  // precision column
      << "mixed_precision shows a precision column";

  // warm-up steps (config.instrument.warmup_steps) are shaded in the step-time chart, up to half a step past them
  int warmup = 0;
  for (const RunResult& r : scenarios[0].runs) warmup = std::max(warmup, r.warmup_steps());
  ASSERT_GT(warmup, 0);
  EXPECT_TRUE(contains(read_text(out / "step_time_baseline.gp"), "to first " + std::to_string(warmup) + ".5, graph 1"));

  // the mixed precision note appears once: only mixed_precision has a bf16 run. It states what cpuid said of this
  // CPU (result.json context.cpu) and the bf16 run's measured time against its fp32 twin's, the way the data went.
  EXPECT_EQ(count(html, "Mixed precision on this CPU."), 1u);
  const auto mixed_at =
      std::find_if(scenarios.begin(), scenarios.end(), [](const Scenario& sc) { return sc.name == "mixed_precision"; });
  ASSERT_NE(mixed_at, scenarios.end());
  const Scenario& mixed = *mixed_at;
  ASSERT_EQ(mixed.runs.size(), 3u);  // fp32, bf16, fp16
  const RunResult& fp32 = mixed.runs[0];
  const RunResult& bf16 = mixed.runs[1];
  ASSERT_TRUE(bf16.cpu.has_value()) << "the fixture records context.cpu";
  EXPECT_TRUE(contains(html, "These runs ran on <strong>" + html_escape(bf16.cpu->model) + "</strong>, which " +
                                 (bf16.cpu->native_bf16() ? "has native bf16" : "has no native bf16")))
      << html;
  const double ratio = bf16.step_ms_median / fp32.step_ms_median;
  EXPECT_TRUE(contains(
      html, "<strong>bf16</strong> (bf16): " + testing::fixed(bf16.step_ms_median, 0) + " ms per step against " +
                testing::fixed(fp32.step_ms_median, 0) + " ms for fp32 (fp32, otherwise the same): " +
                testing::fixed(ratio > 1 ? ratio : 1 / ratio, 2) + "× " + (ratio > 1 ? "slower" : "faster")))
      << html;
}

// A run whose environment kept oneDNN below the bf16 instructions (ONEDNN_MAX_CPU_ISA=AVX2, the CI's stand-in for an
// AVX2-only machine) has no native bf16 in effect, though cpuid has the flags: the note says both, and names the
// setting. Without the setting, the same flags read as native bf16.
TEST(Report, TheMixedPrecisionNoteNamesASettingThatKeptTheKernelsFromBf16) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  const fs::path results = tmp.path() / "results";
  fs::copy(testing::fixtures_dir() + "/results", results, fs::copy_options::recursive);
  const auto with_cpu = [&](const std::string& capped_by) {
    for (const char* run : {"fp32", "bf16", "fp16"}) {
      const fs::path file = results / "mixed_precision" / run / "result.json";
      nlohmann::json doc = nlohmann::json::parse(read_text(file));
      nlohmann::json& cpu = doc.at("context").at("cpu");
      cpu["model"] = "Xeon with bf16";
      cpu["avx512f"] = cpu["avx512_bf16"] = true;
      cpu["kernels_capped_by"] = capped_by;
      testing::write_text(file, doc.dump());
    }
    std::ostringstream log;
    const fs::path out = tmp.path() / ("report" + std::to_string(capped_by.size()));
    EXPECT_EQ(render_report({results.string()}, out.string(), log), 0) << log.str();
    return read_text(out / "index.html");
  };
  const std::string capped = with_cpu("ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_TRUE(contains(capped,
                       "These runs ran on <strong>Xeon with bf16</strong>, which has no native bf16 in these runs: the "
                       "CPU has AVX-512 BF16 (cpuid), but <code>ONEDNN_MAX_CPU_ISA=AVX2</code> kept oneDNN from those "
                       "instructions"))
      << capped;
  const std::string native = with_cpu("");
  EXPECT_TRUE(contains(native,
                       "These runs ran on <strong>Xeon with bf16</strong>, which has native bf16 (cpuid: "
                       "AVX-512 BF16)"))
      << native;
}

// A bf16 run that trains fewer steps than its fp32 twin is still timed against it, and the note says the lengths
// differ.
TEST(Report, TheMixedPrecisionNoteTimesAShorterBf16RunAgainstItsFp32Twin) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  const fs::path results = tmp.path() / "results";
  fs::copy(testing::fixtures_dir() + "/results", results, fs::copy_options::recursive);
  const fs::path file = results / "mixed_precision" / "bf16" / "result.json";
  nlohmann::json doc = nlohmann::json::parse(read_text(file));
  doc["config"]["train"]["steps"] = 3;
  testing::write_text(file, doc.dump());
  const nlohmann::json fp32 = nlohmann::json::parse(read_text(results / "mixed_precision" / "fp32" / "result.json"));
  std::ostringstream log;
  EXPECT_EQ(render_report({results.string()}, (tmp.path() / "report").string(), log), 0) << log.str();
  const std::string html = read_text(tmp.path() / "report" / "index.html");
  EXPECT_TRUE(contains(html, " ms for fp32 (fp32, otherwise the same but 3 steps against " +
                                 std::to_string(fp32["config"]["train"]["steps"].get<int>()) +
                                 ", which changes no step's work): "))
      << html;
}

TEST(Report, EscapesEverythingFromFiles) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  const fs::path sc = tmp.path() / "results" / "evil";
  testing::write_scenario(sc, "evil", {"r1"}, "<b>Title</b> & co", {"<script>alert(1)</script>"});
  auto doc = testing::minimal_result("ddp<i>");
  doc["context"]["command"] = "dtlab train --note='<x>' && echo \"hi\"";
  doc["context"]["host"] = "<host>";
  testing::write_run(sc / "r1", doc);
  const fs::path out = tmp.path() / "out";
  std::ostringstream log;
  ASSERT_EQ(render_report({sc.string()}, out.string(), log), 0) << log.str();
  const std::string html = read_text(out / "index.html");
  EXPECT_FALSE(contains(html, "<script>alert(1)</script>"));
  EXPECT_TRUE(contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_TRUE(contains(html, "&lt;b&gt;Title&lt;/b&gt; &amp; co"));
  EXPECT_TRUE(contains(html, "<code>ddp&lt;i&gt;</code>"));
  EXPECT_TRUE(contains(html, "dtlab train --note=&#39;&lt;x&gt;&#39; &amp;&amp; echo &quot;hi&quot;"));
  EXPECT_TRUE(contains(html, "host &lt;host&gt;"));
}

TEST(Report, PartsAreData) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  std::vector<SectionPart> parts = {
      [](SectionContext& ctx) {
        return "<p class=\"custom\">runs=" + std::to_string(ctx.scenario.runs.size()) + "</p>";
      },
      chart_part("wall", "Wall time per run.",
                 [](const Scenario& s) -> std::optional<Chart> {
                   BarChart c;
                   c.title = "wall";
                   c.y_label = "wall time (s)";
                   c.series_names = {"wall_s"};
                   c.values.resize(1);
                   for (const RunResult& r : s.runs) {
                     c.categories.push_back(r.name);
                     c.values[0].push_back(r.wall_s);
                   }
                   return c;
                 }),
  };
  std::ostringstream log;
  const fs::path out = tmp.path() / "out";
  ASSERT_EQ(render_report({testing::fixtures_dir() + "/results/baseline"}, out.string(), log, parts), 0) << log.str();
  const std::string html = read_text(out / "index.html");
  const std::size_t runs = load_scenario(testing::fixtures_dir() + "/results/baseline").runs.size();  // scenario.json
  EXPECT_TRUE(contains(html, "<p class=\"custom\">runs=" + std::to_string(runs) + "</p>"));
  EXPECT_EQ(count(html, "<img class=\"chart-svg\" src=\"wall_baseline.svg\""), 1u);
  EXPECT_TRUE(png_magic(out / "wall_baseline.png"));
  EXPECT_FALSE(contains(html, "<table class=\"runs\">"));
}

TEST(Report, BadInputsReturnOneAndSayWhy) {
  TempDir tmp;
  std::ostringstream log;
  EXPECT_EQ(render_report({(tmp.path() / "missing").string()}, (tmp.path() / "out").string(), log), 1);
  EXPECT_TRUE(contains(log.str(), "does not exist")) << log.str();
  EXPECT_FALSE(fs::exists(tmp.path() / "out" / "index.html"));
}

TEST(Report, MissingGnuplotStillWritesPageAndSaysSo) {
  TempDir tmp;
  const fs::path out = tmp.path() / "out";
  std::ostringstream log;
  int rc = 0;
  {
    ScopedPath no_tools("/nonexistent");
    rc = render_report({testing::fixtures_dir() + "/results/baseline"}, out.string(), log);
  }
  EXPECT_EQ(rc, 1);
  EXPECT_TRUE(contains(log.str(), "gnuplot not found")) << log.str();
  const std::string html = read_text(out / "index.html");
  EXPECT_TRUE(contains(html, "Chart not rendered"));
  EXPECT_TRUE(contains(html, "apt-get install gnuplot-nox"));
  EXPECT_TRUE(fs::exists(out / "loss_baseline.gp")) << "scripts are still written so the user can render later";
  EXPECT_TRUE(contains(html, "<table class=\"runs\">"));
  // The rerun hint names the report dir, not the staging dir the charts were rendered in.
  EXPECT_TRUE(contains(html, "cd " + out.string() + " &amp;&amp; gnuplot loss_baseline.gp")) << html;
  EXPECT_FALSE(contains(html, ".dtlab-report-")) << html;
}

// Names in `dir` that render_report's staging dirs would have (.dtlab-report-*): none may be left behind.
std::vector<std::string> leftover_staging(const fs::path& dir) {
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".dtlab-report-", 0) == 0) left.push_back(e.path().string());
  return left;
}

// An earlier report in `out`: a page and a chart data file a new render of `baseline` would overwrite.
void write_earlier_report(const fs::path& out) {
  testing::write_text(out / "index.html", "<p>earlier report</p>\n");
  testing::write_text(out / "wall_baseline.dat", "earlier data\n");
}

TEST(Report, MalformedResultJsonIsOneErrorNamingFileAndKeyAndKeepsTheEarlierReport) {
  nlohmann::json wrong_type = testing::minimal_result("ddp", 2);
  wrong_type["summary"]["tokens_per_s"] = "fast";
  nlohmann::json no_summary = testing::minimal_result("ddp", 2);
  no_summary.erase("summary");
  nlohmann::json no_git_sha = testing::minimal_result("ddp", 2);
  no_git_sha["context"].erase("git_sha");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"schema_version": 1, "context": )", "not valid JSON"},
      {"[1, 2, 3]", "the document must be an object, got array"},
      {wrong_type.dump(1), "key \"summary.tokens_per_s\" must be a number, got string"},
      {no_summary.dump(1), "missing required key \"summary\""},
      {no_git_sha.dump(1), "missing required key \"context.git_sha\""},
  };
  for (const auto& [text, what] : cases) {
    TempDir tmp;
    const fs::path sc = tmp.path() / "study";
    testing::write_scenario(sc, "study", {"good", "bad"});
    testing::write_run(sc / "good", testing::minimal_result("single", 1));
    testing::write_text(sc / "bad" / "result.json", text);
    const fs::path out = tmp.path() / "out";
    write_earlier_report(out);
    std::ostringstream log;
    EXPECT_EQ(render_report({sc.string()}, out.string(), log), 1) << what;
    EXPECT_EQ(count(log.str(), "error:"), 1u) << log.str();
    EXPECT_TRUE(contains(log.str(), "error: " + (sc / "bad" / "result.json").string() + ": ")) << log.str();
    EXPECT_TRUE(contains(log.str(), what)) << log.str();
    EXPECT_EQ(read_text(out / "index.html"), "<p>earlier report</p>\n");
    EXPECT_EQ(read_text(out / "wall_baseline.dat"), "earlier data\n");
    EXPECT_TRUE(leftover_staging(out).empty());
  }
}

TEST(Report, AFailedRenderLeavesTheEarlierReportAsItWas) {
  // A chart part writes wall_baseline.dat (gnuplot or not), then a part fails: nothing may reach `out`.
  const ChartBuilder wall = [](const Scenario& s) -> std::optional<Chart> {
    BarChart c;
    c.title = "wall";
    c.y_label = "wall time (s)";
    c.series_names = {"wall_s"};
    c.values.resize(1);
    for (const RunResult& r : s.runs) {
      c.categories.push_back(r.name);
      c.values[0].push_back(r.wall_s);
    }
    return c;
  };
  const std::vector<SectionPart> parts = {
      chart_part("wall", "Wall time per run.", wall),
      [](SectionContext&) -> std::string { throw std::runtime_error("part exploded"); },
  };
  TempDir tmp;
  const fs::path out = tmp.path() / "out";
  write_earlier_report(out);
  std::ostringstream log;
  EXPECT_EQ(render_report({testing::fixtures_dir() + "/results/baseline"}, out.string(), log, parts), 1);
  EXPECT_EQ(count(log.str(), "error:"), 1u) << log.str();
  EXPECT_TRUE(
      contains(log.str(), "error: rendering the report failed: part exploded; " + out.string() + " is left as it was"))
      << log.str();
  EXPECT_EQ(read_text(out / "index.html"), "<p>earlier report</p>\n");
  EXPECT_EQ(read_text(out / "wall_baseline.dat"), "earlier data\n");
  EXPECT_FALSE(fs::exists(out / "wall_baseline.gp"));
  EXPECT_TRUE(leftover_staging(out).empty());

  // The same render without the failing part replaces the earlier report, chart files and page.
  std::ostringstream log2;
  render_report({testing::fixtures_dir() + "/results/baseline"}, out.string(), log2, {parts[0]});
  EXPECT_TRUE(contains(read_text(out / "index.html"), "<!DOCTYPE html>")) << log2.str();
  EXPECT_NE(read_text(out / "wall_baseline.dat"), "earlier data\n");
  EXPECT_TRUE(fs::exists(out / "wall_baseline.gp"));
  EXPECT_TRUE(leftover_staging(out).empty());
}

TEST(Report, OutputDirBelowARegularFileIsOneErrorNamingIt) {
  // Tests run as root, so a chmod'ed directory would still be writable: a path below a regular file is not.
  TempDir tmp;
  testing::write_text(tmp.path() / "a_file", "x");
  for (const fs::path& out : {tmp.path() / "a_file" / "report", tmp.path() / "a_file"}) {
    std::ostringstream log;
    EXPECT_EQ(render_report({testing::fixtures_dir() + "/results/baseline"}, out.string(), log), 1);
    EXPECT_EQ(count(log.str(), "error:"), 1u) << log.str();
    EXPECT_TRUE(contains(log.str(), "error: cannot create report dir " + out.string() + ": ")) << log.str();
  }
  EXPECT_EQ(read_text(tmp.path() / "a_file"), "x");
}

TEST(Report, OutputDirThatRefusesNewFilesIsOneErrorNamingIt) {
  // procfs refuses new entries even to root: the one existing directory a root test cannot write into.
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc here: no directory that refuses root to test with";
  std::ostringstream log;
  EXPECT_EQ(render_report({testing::fixtures_dir() + "/results/baseline"}, "/proc", log), 1);
  EXPECT_EQ(count(log.str(), "error:"), 1u) << log.str();
  EXPECT_TRUE(contains(log.str(), "error: cannot write into report dir /proc: ")) << log.str();
}

}  // namespace
}  // namespace dtlab::analysis
