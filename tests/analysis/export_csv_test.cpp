// export_csv_test.cpp: `dtlab export csv` (analysis/export_csv.hpp): RFC 4180 quoting, the union of columns, and the
// three tables of a real-run fixture study read back row by row against its result.json and steps.jsonl.
#include "analysis/export_csv.hpp"

#include <gtest/gtest.h>

#include "tests/analysis/test_util.hpp"

namespace dtlab::analysis {
namespace {

using testing::TempDir;

// A minimal RFC 4180 reader for the tests: rows of fields (quoted fields may hold commas, quotes and newlines).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        field += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field), field.clear();
    } else if (c == '\n') {
      rows.back().push_back(field), field.clear();
      rows.emplace_back();
    } else {
      field += c;
    }
  }
  rows.pop_back();  // after the last newline
  return rows;
}

size_t column_of(const std::vector<std::string>& header, const std::string& name) {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end()) throw std::runtime_error("no column " + name);
  return static_cast<size_t>(it - header.begin());
}

TEST(ExportCsv, FieldsWithCommasQuotesOrNewlinesAreQuoted) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  const auto rows = parse_csv(csv_table({{{"name", "a,\"b\"\nc"}, {"n", 1}}}, {"name"}));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1][0], "a,\"b\"\nc");
}

TEST(ExportCsv, ColumnsAreTheFixedOnesThenEveryKeyInTheOrderFirstMet) {
  const std::string text = csv_table({{{"run", "x"}, {"b", 1}, {"nested", {{"k", 2.5}}}},
                                      {{"run", "y"}, {"c", true}, {"b", nullptr}, {"list", {1, 2}}}},
                                     {"run"});
  const auto rows = parse_csv(text);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"run", "b", "nested.k", "c", "list"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"x", "1", "2.5", "", ""}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"y", "", "", "true", "[1,2]"}));
}

TEST(ExportCsv, AFixtureStudyReadsBackAsItsOwnFiles) {
  TempDir tmp;
  const std::string study = testing::fixtures_dir() + "/results/baseline";
  const CsvExport e = export_csv({study}, (tmp.path() / "csv").string());
  ASSERT_EQ(e.files.size(), 3u);
  const Scenario sc = load_scenario(study);

  const auto steps = parse_csv(testing::read_text(e.files[0]));
  size_t expected_steps = 0;
  for (const RunResult& r : sc.runs)
    for (const auto& [rank, s] : r.rank_steps) expected_steps += s.size();
  ASSERT_EQ(steps.size() - 1, expected_steps);
  EXPECT_EQ(e.rows[0], expected_steps);
  const auto& h = steps[0];
  for (size_t i = 1; i < steps.size(); ++i) {
    const auto& row = steps[i];
    const RunResult& r = testing::run_named(sc, row[column_of(h, "run")]);
    const StepRecord& s =
        r.rank_steps.at(std::stoi(row[column_of(h, "rank")])).at(std::stoul(row[column_of(h, "step")]) - 1);
    EXPECT_EQ(std::stod(row[column_of(h, "step_ms")]), s.step_ms);  // exact: numbers written as JSON writes them
    EXPECT_EQ(std::stod(row[column_of(h, "loss")]), s.loss);
  }
  EXPECT_NO_THROW(column_of(h, "phases_ms.forward"));

  const auto summary = parse_csv(testing::read_text(e.files[1]));
  ASSERT_EQ(summary.size() - 1, sc.runs.size());
  for (size_t i = 1; i < summary.size(); ++i) {
    const RunResult& r = testing::run_named(sc, summary[i][column_of(summary[0], "run")]);
    EXPECT_EQ(std::stod(summary[i][column_of(summary[0], "summary.step_ms_median")]), r.step_ms_median);
    EXPECT_EQ(summary[i][column_of(summary[0], "status")], "completed");
    EXPECT_EQ(summary[i][column_of(summary[0], "strategy")], r.strategy);
  }

  const auto collectives = parse_csv(testing::read_text(e.files[2]));
  size_t records = 0;
  for (const RunResult& r : sc.runs)
    if (r.raw.contains("comm")) records += r.raw["comm"]["records"].size();
  EXPECT_GT(records, 0u);
  EXPECT_EQ(collectives.size() - 1, records);
  EXPECT_NO_THROW(column_of(collectives[0], "bytes"));
}

TEST(ExportCsv, AnEmptyDirectoryIsAnErrorNamingIt) {
  TempDir tmp;
  std::string message = "(no exception)";
  try {
    export_csv({tmp.path().string()}, (tmp.path() / "csv").string());
  } catch (const AnalysisError& e) {
    message = e.what();
  }
  EXPECT_TRUE(testing::contains(message, tmp.path().string())) << message;
}

}  // namespace
}  // namespace dtlab::analysis
