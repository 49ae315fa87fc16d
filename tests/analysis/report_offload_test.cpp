// report_offload_test.cpp: the CPU-offload part (analysis/report_offload.cpp) over the fixture fixtures/studies/offload
// — real jobs of tiny at world 2 under ZeRO-1 and FULL_SHARD, each without and with parallel.offload.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Scenario offload() { return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "studies/offload"); }

double number(const RunResult& r, std::initializer_list<const char*> path) { return *json_number_at(r.raw, path); }

// What the part rests on, measured: with offload FULL_SHARD's device side falls by what the host buffers take, less
// the compute copy of the shard; the host bytes are the plan's; without offload there are none.
TEST(Offload, TheHostTakesTheStateAndTheDeviceSideFalls) {
  const Scenario sc = offload();
  const RunResult& off = testing::run_named(sc, "fsdp_full_shard@off");
  const RunResult& on = testing::run_named(sc, "fsdp_full_shard@on");
  EXPECT_EQ(number(off, {"memory", "host_bytes"}), 0);
  EXPECT_FALSE(off.raw["memory"].contains("host_measured"));
  const double host = number(on, {"memory", "host_bytes"});
  EXPECT_GT(host, 0);
  EXPECT_EQ(host, number(on, {"prediction", "memory_bytes", "host"}));
  EXPECT_LT(largest_rank_device_side_peak(on), largest_rank_device_side_peak(off));
  EXPECT_EQ(largest_rank_device_side_peak(off), largest_rank_peak(off)) << "without offload nothing is host memory";
}

TEST(Offload, ThePartSplitsTheMemoryAndTeachesFromTheRuns) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = offload();
  testing::TempDir tmp;
  std::vector<std::string> problems;
  std::ostringstream log;
  SectionContext ctx{sc, "off", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = offload_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  const RunResult& off = testing::run_named(sc, "fsdp_full_shard@off");
  const RunResult& on = testing::run_named(sc, "fsdp_full_shard@on");
  EXPECT_NE(html.find("<strong>fsdp_full_shard</strong>: offload keeps " +
                      testing::fixed(number(on, {"memory", "host_bytes"}) / kMiB, 1) +
                      " MiB per rank in host buffers; the device-side peak goes from " +
                      testing::fixed(largest_rank_device_side_peak(off) / kMiB, 1) + " to " +
                      testing::fixed(largest_rank_device_side_peak(on) / kMiB, 1) + " MiB"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("equal the strategy's plan in 2 of 2 offload runs"), std::string::npos) << html;
  EXPECT_NE(html.find("host-to-host memcpy"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "offload_memory_off.png"));
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "offload_time_off.png"));
  // A scenario without offload pairs contributes nothing.
  const Scenario none = load_scenario(std::filesystem::path(testing::fixtures_dir()) / "studies/checkpointing");
  SectionContext other{none, "none", tmp.path(), tmp.path().string(), log, problems};
  EXPECT_EQ(offload_part(other), "");
}

}  // namespace
}  // namespace dtlab::analysis
