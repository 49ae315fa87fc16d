// course_test.cpp: the report's learning order (analysis/course.cpp) — every study joins it, sections follow it
// whatever the order of the result directories, and a study outside it still renders, after the course's.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "analysis/course.hpp"
#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

namespace fs = std::filesystem;

// A new study must take its place in the course; a course line must name a study that exists.
TEST(Course, EveryStudyHasItsPlaceAndEveryPlaceItsStudy) {
  std::set<std::string> studies;
  for (const auto& e : fs::directory_iterator(fs::path(DTLAB_SOURCE_DIR) / "scenarios" / "studies"))
    if (e.path().extension() == ".yaml") studies.insert(e.path().stem().string());
  ASSERT_FALSE(studies.empty());
  for (const std::string& s : studies)
    EXPECT_TRUE(course_place(s).has_value()) << "scenarios/studies/" << s << ".yaml has no line in analysis/course.cpp";
  for (const CourseStop& stop : course())
    EXPECT_EQ(studies.count(stop.study), 1u) << "analysis/course.cpp names " << stop.study << ", not a study";
}

TEST(Course, ScenariosComeInCourseOrderAndOthersAfterByName) {
  std::vector<Scenario> scenarios;
  for (const char* name : {"tensor_parallel", "zz_mine", "baseline", "accumulation", "aa_mine", "sharding", "ddp"}) {
    Scenario sc;
    sc.name = name;
    scenarios.push_back(sc);
  }
  std::vector<std::string> names;
  for (const Scenario& sc : in_course_order(scenarios)) names.push_back(sc.name);
  EXPECT_EQ(names, (std::vector<std::string>{"baseline", "ddp", "sharding", "accumulation", "tensor_parallel",
                                             "aa_mine", "zz_mine"}));
  EXPECT_EQ(course_place("baseline"), 1);
  EXPECT_FALSE(course_place("zz_mine").has_value());
}

// The page: sections and the table of contents in course order, each course section labelled with its step.
TEST(Course, TheReportRendersItsSectionsInCourseOrder) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  testing::TempDir tmp;
  std::vector<std::string> inputs;
  for (const char* name : {"accumulation", "baseline", "mine", "sharding"}) {  // the file names' order
    const fs::path study = tmp.path() / name;
    testing::write_scenario(study, name, {"r1"});
    testing::write_run(study / "r1", testing::minimal_result("single"));
    inputs.push_back(study.string());
  }
  std::ostringstream log;
  ASSERT_EQ(render_report(inputs, (tmp.path() / "out").string(), log), 0) << log.str();
  const std::string html = testing::read_text(tmp.path() / "out" / "index.html");
  const auto at = [&](const std::string& s) {
    const std::size_t pos = html.find(s);
    EXPECT_NE(pos, std::string::npos) << s;
    return pos;
  };
  const std::size_t baseline = at("id=\"scenario-baseline\""), sharding = at("id=\"scenario-sharding\""),
                    accumulation = at("id=\"scenario-accumulation\""), mine = at("id=\"scenario-mine\"");
  EXPECT_LT(baseline, sharding);
  EXPECT_LT(sharding, accumulation);
  EXPECT_LT(accumulation, mine);
  EXPECT_LT(at("<a href=\"#scenario-baseline\">1. One process: "), at("<a href=\"#scenario-sharding\">4. "));
  EXPECT_NE(html.find("<span class=\"course-step\">Step 10 · Gradient accumulation</span>"), std::string::npos);
  EXPECT_EQ(html.find("<span class=\"course-step\">Step", mine), std::string::npos) << "mine is not in the course";
}

}  // namespace
}  // namespace dtlab::analysis
