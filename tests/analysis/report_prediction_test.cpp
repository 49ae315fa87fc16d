// report_prediction_test.cpp: the "Predicted vs measured" report part -- charts and error table from the real
// study under fixtures/prediction/ (expectations read from its result.json files), nothing for results without
// predictions, projections labelled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::read_text;
using testing::TempDir;

// Renders prediction_part alone for `sc` into `out_dir`.
std::string render_part(const Scenario& sc, const fs::path& out_dir, std::vector<std::string>& problems) {
  std::ostringstream log;
  SectionContext ctx{sc, sc.name, out_dir, out_dir.string(), log, problems};
  return prediction_part(ctx);
}

// "%+.1f%%" as the report writes an error, "+0.0%" for a tiny one.
std::string signed_pct(double predicted, double measured) {
  double pct = (predicted - measured) / measured * 100.0;
  if (std::abs(pct) < 0.05) pct = 0.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", pct);
  return buf;
}

// The numbers after the quoted category `name` on its row of a bar chart's .dat file; empty when there is no row.
std::vector<double> dat_row(const std::string& dat, const std::string& name) {
  std::istringstream lines(dat);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("\"" + name + "\" ", 0) != 0) continue;
    std::istringstream values(line.substr(name.size() + 3));
    std::vector<double> out;
    for (double v; values >> v;) out.push_back(v);
    return out;
  }
  return {};
}

TEST(ReportPrediction, FixtureStudyChartsAndTable) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  const fs::path out = tmp.path() / "report";
  std::ostringstream log;
  ASSERT_EQ(render_report({testing::fixtures_dir() + "/prediction"}, out.string(), log), 0) << log.str();
  const std::string html = read_text(out / "index.html");
  EXPECT_TRUE(contains(html, "<h3>Predicted vs measured</h3>"));

  // what each run's result.json holds
  const Scenario sc = load_scenario(testing::fixtures_dir() + "/prediction/sharding");
  std::map<std::string, json> predictions;  // run -> its "prediction"
  std::set<std::string> profiles;
  for (const RunResult& r : sc.runs) {
    if (!r.raw.contains("prediction")) continue;
    const json& p = predictions[r.name] = r.raw["prediction"];
    profiles.insert(p["profile"].is_null()
                        ? "none (memory and bytes only)"
                        : p["profile"].get<std::string>() + ", " + p["profile_kind"].get<std::string>());
  }
  std::string profile_list;
  for (const std::string& p : profiles) profile_list += (profile_list.empty() ? "" : "; ") + p;
  EXPECT_TRUE(contains(html, std::to_string(predictions.size()) + " of " + std::to_string(sc.runs.size()) +
                                 " runs carry a prediction. Machine profile: " + html_escape(profile_list) + "."))
      << html;
  for (const char* kind : {"pred_step_time", "pred_memory", "pred_scatter_step", "pred_scatter_peak"}) {
    const std::string id = std::string(kind) + "_sharding";
    EXPECT_TRUE(contains(html, "id=\"chart-" + id + "\"")) << id;
    EXPECT_TRUE(fs::exists(out / (id + ".png"))) << id;
  }
  // twin bars: predicted and measured step time per run with a predicted time (single was predicted without a
  // machine profile: memory and bytes only)
  const std::string bars = read_text(out / "pred_step_time_sharding.dat");
  int timed = 0;
  for (const RunResult& r : sc.runs) {
    const json& p = predictions.at(r.name);
    const std::vector<double> row = dat_row(bars, r.name);
    if (p["step_ms"].is_null()) {
      EXPECT_TRUE(row.empty()) << r.name << "\n" << bars;
      continue;
    }
    ++timed;
    ASSERT_EQ(row.size(), 2u) << r.name << "\n" << bars;
    EXPECT_NEAR(row[0], p["step_ms"].get<double>(), 1e-6 * row[0]) << r.name;
    EXPECT_NEAR(row[1], r.step_ms_median, 1e-6 * row[1]) << r.name;
  }
  EXPECT_GE(timed, 3) << "ddp, zero1 and fsdp_full_shard ran with a machine profile";
  // memory: a predicted and a measured stack per run
  const std::string mem = read_text(out / "pred_memory_sharding.dat");
  EXPECT_TRUE(contains(mem, "\"zero1 · predicted\"")) << mem;
  EXPECT_TRUE(contains(mem, "\"zero1 · measured\"")) << mem;
  // scatter: each run's error in its legend entry, and the y = x reference
  const json& fsdp = predictions.at("fsdp_full_shard");
  const std::string scatter = read_text(out / "pred_scatter_step_sharding.gp");
  const RunResult& fsdp_run =
      *std::find_if(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) { return r.name == "fsdp_full_shard"; });
  EXPECT_TRUE(contains(
      scatter, "title 'fsdp_full_shard (" + signed_pct(fsdp["step_ms"].get<double>(), fsdp_run.step_ms_median) + ")'"))
      << scatter;
  EXPECT_TRUE(contains(scatter, "title 'y = x (exact)'")) << scatter;
  // error table: "(exact)" where the bytes agree to the byte (the cost plans predict kept state exactly), else the
  // relative error; zero1's row checked cell by cell
  auto range = [](double predicted, double measured) {
    return "<span class=\"range\">(" + (predicted == measured ? "exact" : signed_pct(predicted, measured)) + ")</span>";
  };
  const json& zero1 = predictions.at("zero1");
  const RunResult& zero1_run =
      *std::find_if(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) { return r.name == "zero1"; });
  EXPECT_TRUE(contains(html, range(zero1["step_ms"], zero1_run.step_ms_median))) << "zero1's step time";
  for (const json& m : zero1_run.raw["memory"]["ranks"]) {
    if (m["rank"] != zero1["rank"]) continue;
    for (const char* category : {"params", "grads", "optimizer"}) {
      EXPECT_TRUE(contains(html, range(zero1["memory_bytes"][category], m[std::string(category) + "_bytes"])))
          << "zero1's " << category;
    }
    EXPECT_TRUE(contains(html, range(zero1["memory_bytes"]["peak"], m["tensor_peak_bytes"]))) << "zero1's peak";
  }
  for (const auto& [run, p] : predictions)  // prediction notes
    for (const json& note : p["notes"]) EXPECT_TRUE(contains(html, html_escape(note.get<std::string>()))) << note;
  EXPECT_FALSE(contains(html, "(projection)"));
}

TEST(ReportPrediction, NothingWithoutPredictions) {
  // The real baseline runs with "prediction" removed: results written before predictions existed.
  TempDir tmp;
  const fs::path baseline = testing::copy_fixture("results/baseline", tmp.path() / "baseline");
  for (const fs::path& run : testing::run_dirs_below(baseline))
    testing::edit_result(run, [](json& doc) { doc.erase("prediction"); });
  std::vector<std::string> problems;
  const Scenario sc = load_scenario(baseline);
  EXPECT_EQ(render_part(sc, tmp.path(), problems), "");
  EXPECT_TRUE(problems.empty());
}

TEST(ReportPrediction, ProjectionsAreLabelled) {
  TempDir tmp;
  json doc = testing::minimal_result("fsdp_full_shard", 2);
  doc["prediction"] = {{"label", "projection"},          {"profile", "h100_sxm"},
                       {"profile_kind", "spec-sheet"},   {"rank", 0},
                       {"memory_bytes", json::object()}, {"step_ms", 12.5}};
  testing::write_run(tmp.path() / "s" / "big", doc);
  testing::write_scenario(tmp.path() / "s", "scaling", {"big"});
  std::vector<std::string> problems;
  const std::string html = render_part(load_scenario(tmp.path() / "s"), tmp.path(), problems);
  EXPECT_TRUE(contains(html, "<strong>Projection.</strong>")) << html;
  EXPECT_TRUE(contains(html, "h100_sxm, spec-sheet")) << html;
  EXPECT_TRUE(contains(html, "<td>projection</td>")) << html;
  // Chart data is written before gnuplot runs: checked with or without gnuplot.
  EXPECT_TRUE(contains(read_text(tmp.path() / "pred_step_time_scaling.dat"), "\"big (projection)\" 12.5 410"));
  if (!gnuplot_available())
    GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox): the charts were not rendered, so the "
                    "render is not checked for problems (the labels and chart data above were)";
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems[0]);
}

TEST(ReportPrediction, MalformedPredictionIsAProblemNotACrash) {
  TempDir tmp;
  json doc = testing::minimal_result("ddp", 2);
  doc["prediction"] = json::array();
  testing::write_run(tmp.path() / "s" / "bad", doc);
  testing::write_scenario(tmp.path() / "s", "broken", {"bad"});
  std::vector<std::string> problems;
  const std::string html = render_part(load_scenario(tmp.path() / "s"), tmp.path(), problems);
  EXPECT_TRUE(contains(html, "class=\"problem\"")) << html;
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(contains(problems[0], "\"prediction\"")) << problems[0];
}

}  // namespace
}  // namespace dtlab::analysis
