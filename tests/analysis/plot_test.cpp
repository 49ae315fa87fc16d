// plot_test.cpp: gnuplot data/script files (always) and rendering (skipped without gnuplot).
#include "analysis/plot.hpp"

#include <gtest/gtest.h>

#include "analysis/results.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
using testing::read_text;
using testing::TempDir;

LineChart two_series() {
  LineChart c;
  c.id = "loss_test";
  c.title = "Loss: it's a test";
  c.x_label = "step";
  c.y_label = "loss (nats/token)";
  c.series.push_back({"fsdp_full_shard", {1, 2, 3}, {5.0, 4.0, 3.5}});
  c.series.push_back({"ddp", {1, 2}, {5.1, 4.1}});
  return c;
}

BarChart bars() {
  BarChart c;
  c.id = "throughput_test";
  c.title = "Throughput";
  c.y_label = "tokens/s";
  c.categories = {"single", "ddp"};
  c.series_names = {"tokens/s"};
  c.values = {{9950, 15000}};
  return c;
}

bool starts_with_png_magic(const std::filesystem::path& p) { return read_text(p).rfind("\x89PNG\r\n\x1a\n", 0) == 0; }

TEST(Plot, LineChartWritesRelativeScriptAndBlocks) {
  TempDir tmp;
  const ChartFiles f = write_chart(two_series(), tmp.path());
  EXPECT_EQ(f.script, tmp.path() / "loss_test.gp");
  EXPECT_EQ(f.rerun_command(), "gnuplot loss_test.gp");
  const std::string gp = read_text(f.script);
  const std::string dat = read_text(f.dat);
  EXPECT_NE(gp.find("set output 'loss_test.svg'"), std::string::npos);
  EXPECT_NE(gp.find("set output 'loss_test.png'"), std::string::npos);
  EXPECT_NE(gp.find("noenhanced"), std::string::npos);
  EXPECT_NE(gp.find("'loss_test.dat' index 1"), std::string::npos);
  EXPECT_NE(gp.find("'Loss: it''s a test'"), std::string::npos) << "quotes are doubled in gnuplot strings";
  EXPECT_NE(gp.find("set ylabel 'loss (nats/token)'"), std::string::npos);
  EXPECT_EQ(gp.find(tmp.path().string()), std::string::npos) << "script must use relative paths";
  EXPECT_NE(dat.find("3 3.5\n\n\n"), std::string::npos) << dat;  // series blocks separated by two blank lines
}

// The report's convention: a prediction is drawn dashed in its measurement's colour, wherever it sits in the list;
// measured series take the palette in order. A chart without such a pair keeps its colours by position.
TEST(Plot, APredictionTakesItsMeasurementsColourDashed) {
  TempDir tmp;
  LineChart c = two_series();
  c.series.push_back({"fsdp_full_shard (predicted)", {1, 2, 3}, {5.0, 4.1, 3.4}});
  c.series.push_back({"ddp (model)", {1, 2}, {5.0, 4.0}});
  c.series.push_back({"zero1", {1, 2}, {5.2, 4.2}});
  const std::string gp = read_text(write_chart(c, tmp.path()).script);
  EXPECT_NE(gp.find("index 0 using 1:2 with linespoints lt 1 title 'fsdp_full_shard'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("index 1 using 1:2 with linespoints lt 2 title 'ddp'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("index 2 using 1:2 with linespoints lt 1 dt 2 lw 1.5 title 'fsdp_full_shard (predicted)'"),
            std::string::npos)
      << gp;
  EXPECT_NE(gp.find("index 3 using 1:2 with linespoints lt 2 dt 2 lw 1.5 title 'ddp (model)'"), std::string::npos)
      << gp;
  EXPECT_NE(gp.find("index 4 using 1:2 with linespoints lt 3 title 'zero1'"), std::string::npos) << gp;
  const std::string plain = read_text(write_chart(two_series(), tmp.path()).script);
  EXPECT_NE(plain.find("index 1 using 1:2 with linespoints lt 2 title 'ddp'"), std::string::npos) << plain;
}

// Past kMaxOverlaidSeries legend entries, a chart becomes small multiples: one panel per measured series with its
// prediction, on shared axes, one key for the page, a reference line grey in every panel, the page taller. Six entries
// stay one plot.
TEST(Plot, MoreThanSixSeriesBecomeSmallMultiples) {
  TempDir tmp;
  LineChart c = two_series();
  c.series.clear();
  c.y_from_zero = true;
  for (const std::string name : {"ddp", "zero1", "fsdp_full_shard", "fsdp_hybrid"}) {
    const double k = static_cast<double>(c.series.size() + 1);
    c.series.push_back({name, {1, 2, 4}, {3 * k, 2 * k, 1 * k}});
    c.series.push_back({name + " (predicted)", {1, 2, 4}, {3.1 * k, 2.1 * k, 1.1 * k}});
  }
  Series cap{"cap", {1, 4}, {20, 20}};
  cap.in_every_panel = true;
  c.series.push_back(cap);
  const ChartFiles f = write_chart(c, tmp.path());
  const std::string gp = read_text(f.script);
  EXPECT_EQ(f.panels, 4);
  EXPECT_GT(f.svg_height, kChartSvgHeight);
  EXPECT_NE(gp.find("set multiplot layout 2,2 title 'Loss: it''s a test'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set xrange [1:4]\nset yrange [0:"), std::string::npos) << "one range for every panel:\n" << gp;
  for (const std::string name : {"ddp", "zero1", "fsdp_full_shard", "fsdp_hybrid"})
    EXPECT_NE(gp.find("set title '" + name + "'"), std::string::npos) << name << "\n" << gp;
  EXPECT_NE(gp.find("index 6 using 1:2 with linespoints lt 4 notitle"), std::string::npos) << gp;
  EXPECT_NE(gp.find("index 7 using 1:2 with linespoints lt 4 dt 2 lw 1.5 notitle"), std::string::npos) << gp;
  EXPECT_NE(gp.find("lc rgb '#777777' dt 3 lw 1.5 notitle"), std::string::npos) << "the reference, grey:\n" << gp;
  EXPECT_NE(gp.find("set label 93 'solid: measured   dashed: predicted   grey dotted: cap'"), std::string::npos)
      << "one key for the page:\n"
      << gp;
  std::size_t cap_draws = 0;
  for (std::size_t at = gp.find("index 8 "); at != std::string::npos; at = gp.find("index 8 ", at + 1)) ++cap_draws;
  EXPECT_EQ(cap_draws, 8u) << "the reference line in each of 4 panels, on the SVG and on the PNG";
  EXPECT_EQ(gp.find("replot"), std::string::npos) << "gnuplot cannot replot a multiplot";
  if (gnuplot_available()) {
    run_gnuplot(f, tmp.path());
    const std::string svg = read_text(f.svg);
    EXPECT_NE(svg.find(">fsdp_hybrid<"), std::string::npos);
    EXPECT_NE(svg.find("height=\"" + std::to_string(f.svg_height) + "\""), std::string::npos);
    EXPECT_TRUE(starts_with_png_magic(f.png));
  }
  c.series.resize(6);  // three pairs: one plot
  const ChartFiles one = write_chart(c, tmp.path());
  EXPECT_EQ(one.panels, 1);
  EXPECT_EQ(one.svg_height, kChartSvgHeight);
  EXPECT_EQ(read_text(one.script).find("multiplot"), std::string::npos);
}

// A schedule's formula (the pipeline study's bubble chart) is a model too: it pairs with its measurement, so four
// schedules at two pipeline depths are eight panels of two lines, not sixteen of one.
TEST(Plot, AFormulaSeriesJoinsItsMeasurementsPanel) {
  TempDir tmp;
  LineChart c = two_series();
  c.series.clear();
  for (const std::string name : {"gpipe, P 2", "1f1b, P 2", "gpipe, P 4", "1f1b, P 4"}) {
    c.series.push_back({name, {2, 4, 8}, {0.5, 0.25, 0.125}});
    c.series.push_back({name + " (formula)", {2, 4, 8}, {0.5, 0.25, 0.125}});
  }
  const ChartFiles f = write_chart(c, tmp.path());
  EXPECT_EQ(f.panels, 4);
  EXPECT_NE(read_text(f.script).find("set title '1f1b, P 4'"), std::string::npos);
}

TEST(Plot, BarChartStartsAtZero) {
  TempDir tmp;
  const ChartFiles f = write_chart(bars(), tmp.path());
  const std::string gp = read_text(f.script);
  EXPECT_NE(gp.find("set yrange [0:"), std::string::npos);
  EXPECT_NE(gp.find("xtic(1)"), std::string::npos);
  EXPECT_NE(read_text(f.dat).find("\"single\" 9950"), std::string::npos);
}

TEST(Plot, ValidatesInput) {
  TempDir tmp;
  LineChart bad = two_series();
  bad.id = "../escape";
  EXPECT_THROW(write_chart(bad, tmp.path()), AnalysisError);
  bad = two_series();
  bad.series[0].y.pop_back();
  EXPECT_THROW(write_chart(bad, tmp.path()), AnalysisError);
  BarChart b = bars();
  b.values[0].pop_back();
  EXPECT_THROW(write_chart(b, tmp.path()), AnalysisError);
}

TEST(Plot, RendersSvgAndPng) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  for (const ChartFiles& f : {write_chart(two_series(), tmp.path()), write_chart(bars(), tmp.path())}) {
    run_gnuplot(f, tmp.path());
    EXPECT_NE(read_text(f.svg).find("<svg"), std::string::npos);
    EXPECT_TRUE(starts_with_png_magic(f.png)) << f.png;
  }
}

// Point labels go to the data file as a quoted third column and gnuplot draws them (the SVG has their text); a label
// count that does not match the points is refused.
TEST(Plot, PointLabelsAreDrawnBesideThePoints) {
  LineChart c = two_series();
  c.series[0].point_labels = {"none", "every 2", "full \"k\""};
  TempDir tmp;
  const ChartFiles f = write_chart(c, tmp.path());
  EXPECT_NE(read_text(f.dat).find("2 4 \"every 2\"\n"), std::string::npos) << read_text(f.dat);
  EXPECT_NE(read_text(f.dat).find("\"full 'k'\""), std::string::npos) << "a quote cannot end the field early";
  EXPECT_NE(read_text(f.script).find("using 1:2:3 with labels"), std::string::npos);
  if (gnuplot_available()) {
    run_gnuplot(f, tmp.path());
    EXPECT_NE(read_text(f.svg).find(">every 2<"), std::string::npos) << read_text(f.svg);
  }
  c.series[1].point_labels = {"one"};
  EXPECT_THROW(write_chart(c, tmp.path()), AnalysisError);
}

TEST(Plot, GnuplotFailureIsReported) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  const ChartFiles f = write_chart(bars(), tmp.path());
  testing::write_text(f.script, "this is not gnuplot\n");
  try {
    run_gnuplot(f, tmp.path());
    ADD_FAILURE() << "expected AnalysisError";
  } catch (const AnalysisError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("throughput_test"), std::string::npos) << msg;
    EXPECT_NE(msg.find("exit code"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace dtlab::analysis
