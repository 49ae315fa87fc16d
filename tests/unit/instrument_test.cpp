// instrument_test.cpp: the instrumentation layer's arithmetic on synthetic inputs — interval overlap, exposed
// vs overlapped communication, phase accounting, distributions, bus-bandwidth factors, span names,
// spec-sheet peaks — and the step line's format (patterns, not bytes).
#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "lab/instrument/overlap.hpp"
#include "lab/instrument/peak_flops.hpp"
#include "lab/instrument/step_analysis.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/train/trainer.hpp"

namespace dtlab {
namespace {

TEST(Overlap, MergeJoinsOverlappingAndTouchingAndDropsEmpty) {
  const auto m = merge({{5, 7}, {0, 2}, {1, 3}, {3, 4}, {9, 9}, {8, 6}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].start, 0);
  EXPECT_EQ(m[0].end, 4);
  EXPECT_EQ(m[1].start, 5);
  EXPECT_EQ(m[1].end, 7);
  EXPECT_DOUBLE_EQ(total_length(m), 6.0);
}

TEST(Overlap, SubtractCutsHolesAndEnds) {
  const auto d = subtract({{0, 10}, {20, 30}}, {{-5, 1}, {4, 6}, {9, 21}, {25, 26}});
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].start, 1);
  EXPECT_EQ(d[0].end, 4);
  EXPECT_EQ(d[1].start, 6);
  EXPECT_EQ(d[1].end, 9);
  EXPECT_EQ(d[2].start, 21);
  EXPECT_EQ(d[2].end, 25);
  EXPECT_EQ(d[3].start, 26);
  EXPECT_EQ(d[3].end, 30);
  EXPECT_TRUE(subtract({{0, 1}}, {{0, 1}}).empty());
  EXPECT_EQ(subtract({{0, 1}}, {}).size(), 1u);
}

TEST(Overlap, SplitCountsConcurrentCollectivesOnce) {
  // Compute [0,10) and [20,30); two collectives overlapping each other: [5,25) and [8,12).
  const OverlapSplit s = split_overlap({{5, 25}, {8, 12}}, {{0, 10}, {20, 30}});
  EXPECT_DOUBLE_EQ(s.comm_us, 20.0);        // union [5,25)
  EXPECT_DOUBLE_EQ(s.overlapped_us, 10.0);  // [5,10) + [20,25)
  EXPECT_DOUBLE_EQ(s.exposed_us, 10.0);
  EXPECT_DOUBLE_EQ(s.overlap_pct(), 50.0);
  EXPECT_DOUBLE_EQ(split_overlap({}, {{0, 1}}).overlap_pct(), 0.0);
  EXPECT_DOUBLE_EQ(split_overlap({{0, 4}}, {{0, 10}}).overlap_pct(), 100.0);
}

PhaseSpan span(Phase p, double s, double e, int depth = 0) { return {p, phase_key(p), s, e, depth}; }

TEST(StepAnalysis, ComputeExcludesWaitsNestedInIt) {
  // backward [10,50) with a blocking wait [20,30) inside; forward [0,10); data [−5,0) is not compute.
  const auto c = compute_intervals({span(Phase::data, -5, 0), span(Phase::forward, 0, 10),
                                    span(Phase::comm_wait, 20, 30, 1), span(Phase::backward, 10, 50)});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].start, 0);
  EXPECT_EQ(c[0].end, 20);
  EXPECT_EQ(c[1].start, 30);
  EXPECT_EQ(c[1].end, 50);
}

CollectiveRecord record(const std::string& op, int64_t bytes, double s, double e, int group = 2) {
  CollectiveRecord r;
  r.op = op;
  r.algorithm = "backend";
  r.dtype = "float32";
  r.bytes = bytes;
  r.group_size = group;
  r.group = "world";
  r.tag = "ddp.bucket.0";
  r.start_us = s;
  r.end_us = e;
  return r;
}

TEST(StepAnalysis, PerCollectiveExposedOverlappedAndBandwidth) {
  const std::vector<PhaseSpan> spans = {span(Phase::forward, 0, 100), span(Phase::comm_wait, 120, 160, 1),
                                        span(Phase::backward, 100, 200)};
  // all_reduce of 1 MB from 150 to 250: overlapped [160,200) = 40 us, exposed 60 us.
  // all_gather still running at the step's end (end 0): counted to the step end (300).
  const StepComm c =
      analyse_step_comm(spans, {record("all_reduce", 1000000, 150, 250), record("all_gather", 0, 280, 0)}, 7, 300);
  ASSERT_EQ(c.records.size(), 2u);
  const auto& ar = c.records[0];
  EXPECT_EQ(ar["step"], 7);
  EXPECT_DOUBLE_EQ(ar["time_us"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(ar["overlapped_us"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(ar["exposed_us"].get<double>(), 60.0);
  EXPECT_DOUBLE_EQ(ar["algbw_GBps"].get<double>(), 10.0);  // 1e6 B / 100 us
  EXPECT_DOUBLE_EQ(ar["busbw_GBps"].get<double>(), 10.0);  // 2(n-1)/n = 1 at n = 2
  EXPECT_DOUBLE_EQ(c.records[1]["end_us"].get<double>(), 300.0);
  EXPECT_DOUBLE_EQ(c.comm_ms, 0.120);  // [150,250) + [280,300)
  EXPECT_DOUBLE_EQ(c.exposed_ms, 0.080);
  EXPECT_NEAR(c.overlap_pct, 100.0 * 40.0 / 120.0, 1e-9);
}

TEST(StepAnalysis, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor("all_reduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor("reduce_scatter", 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor("broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor("barrier", 8), 0.0);
  EXPECT_DOUBLE_EQ(busbw_factor("all_reduce", 1), 0.0);
}

TEST(StepAnalysis, TimelineLanesAreRelativeToTheStepStart) {
  const std::vector<PhaseSpan> spans = {span(Phase::data, 1000, 1010), span(Phase::forward, 1010, 1100),
                                        span(Phase::comm_wait, 1150, 1160, 1), span(Phase::backward, 1100, 1200),
                                        span(Phase::optimizer, 1200, 1250)};
  const StepComm c = analyse_step_comm(spans, {record("all_reduce", 8, 1140, 1160)}, 3, 1260);
  const auto tl = step_timeline(1, 3, 1000, 1260, spans, c.records);
  EXPECT_EQ(tl["rank"], 1);
  EXPECT_DOUBLE_EQ(tl["step_ms"].get<double>(), 0.26);
  std::map<std::string, double> by_lane;
  for (const auto& s : tl["spans"]) {
    EXPECT_GE(s["start_us"].get<double>(), 0.0);
    EXPECT_LE(s["end_us"].get<double>(), 260.0);
    by_lane[s["lane"]] += s["end_us"].get<double>() - s["start_us"].get<double>();
  }
  EXPECT_DOUBLE_EQ(by_lane["data"], 10);
  EXPECT_DOUBLE_EQ(by_lane["compute"], 180);  // forward 90 + backward 100 - wait 10
  EXPECT_DOUBLE_EQ(by_lane["wait"], 10);
  EXPECT_DOUBLE_EQ(by_lane["optimizer"], 50);
  EXPECT_DOUBLE_EQ(by_lane["comm"], 20);
}

TEST(StepAnalysis, DistributionUsesNearestRankP95) {
  std::vector<double> v;
  for (int i = 1; i <= 20; ++i) v.push_back(i);
  const auto d = distribution(v);
  EXPECT_DOUBLE_EQ(d["min"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(d["max"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(d["mean"].get<double>(), 10.5);
  EXPECT_DOUBLE_EQ(d["median"].get<double>(), 10.5);
  EXPECT_DOUBLE_EQ(d["p95"].get<double>(), 19);
  EXPECT_DOUBLE_EQ(distribution({}).at("p95").get<double>(), 0.0);
}

TEST(StepAnalysis, ProcessCpuSecondsGrowsWithWork) {
  // Busy work until the clock-tick-granular counter moves (or 5 s of wall time, which fails the test).
  const double before = process_cpu_seconds();
  EXPECT_GT(before, 0.0);
  const auto start = std::chrono::steady_clock::now();
  volatile double x = 0;
  while (process_cpu_seconds() <= before && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    for (int i = 0; i < 1000000; ++i) x = x + 1e-9 * i;
  EXPECT_GT(process_cpu_seconds(), before);
}

TEST(StepProfiler, PhasesAreExclusiveAndSumToTheStep) {
  StepProfiler& prof = StepProfiler::instance();
  prof.configure(false, nullptr);
  prof.begin_step(1);
  {
    ScopedPhase fwd(Phase::forward, "forward-compute");
    ScopedPhase wait(Phase::comm_wait, "params-all-gather fsdp.params.unit0");
  }
  { ScopedPhase bwd(Phase::backward, "backward-compute"); }
  prof.end_step();
  ASSERT_EQ(prof.spans().size(), 3u);
  EXPECT_EQ(prof.spans()[0].name, "params-all-gather fsdp.params.unit0");  // ends first
  EXPECT_EQ(prof.spans()[0].depth, 1);
  EXPECT_EQ(prof.spans()[1].depth, 0);
  const PhaseTimes ms = prof.phase_ms();
  double sum = 0;
  for (double v : ms) sum += v;
  EXPECT_NEAR(sum, (prof.step_end_us() - prof.step_start_us()) / 1000.0, 1e-9);
  const auto& fwd = prof.spans()[1];
  const auto& wait = prof.spans()[0];
  EXPECT_NEAR(ms[static_cast<int>(Phase::forward)] + ms[static_cast<int>(Phase::comm_wait)],
              (fwd.end_us - fwd.start_us) / 1000.0, 1e-9);
  EXPECT_NEAR(ms[static_cast<int>(Phase::comm_wait)], (wait.end_us - wait.start_us) / 1000.0, 1e-9);
}

TEST(StepProfiler, RecordsNothingOutsideAStepOrOnAnotherThread) {
  StepProfiler& prof = StepProfiler::instance();
  prof.begin_step(2);
  std::thread other([] { ScopedPhase p(Phase::forward, "forward-compute"); });
  other.join();
  prof.end_step();
  { ScopedPhase after(Phase::backward, "backward-compute"); }
  EXPECT_TRUE(prof.spans().empty());
}

TEST(StepProfiler, CollectiveSpanNamesUseMegatronVocabulary) {
  EXPECT_EQ(collective_span_name("all_gather", "fsdp.params.unit3"), "params-all-gather fsdp.params.unit3");
  EXPECT_EQ(collective_span_name("reduce_scatter", "fsdp.grads.unit3"), "grads-reduce-scatter fsdp.grads.unit3");
  EXPECT_EQ(collective_span_name("all_reduce", "ddp.bucket.2"), "grads-all-reduce ddp.bucket.2");
  EXPECT_EQ(collective_span_name("all_reduce", "metric"), "all_reduce metric");
  EXPECT_EQ(collective_span_name("barrier", ""), "barrier");
}

TEST(PeakFlops, SpecSheetPeaksByDeviceName) {
  EXPECT_DOUBLE_EQ(*spec_sheet_peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16"), 989.5);
  EXPECT_DOUBLE_EQ(*spec_sheet_peak_tflops("NVIDIA H100 PCIe", "bfloat16"), 756.0);
  EXPECT_DOUBLE_EQ(*spec_sheet_peak_tflops("NVIDIA A100-SXM4-80GB", "float32"), 156.0);
  EXPECT_FALSE(spec_sheet_peak_tflops("Some CPU", "bfloat16").has_value());
  EXPECT_FALSE(spec_sheet_peak_tflops("NVIDIA H200", "int8").has_value());
}

TEST(PeakFlops, GemmProbeIsPositiveAndRejectsBadShapes) {
  EXPECT_GT(measure_gemm_tflops(64, 64, 64, at::kFloat, 0.01), 0.0);
  EXPECT_THROW(measure_gemm_tflops(0, 64, 64, at::kFloat, 0.01), std::invalid_argument);
}

// Golden pattern of the step line: fields, units and separators (values vary run to run).
TEST(StepLine, MatchesTheDocumentedPattern) {
  StepRecord r;
  r.step = 12;
  r.loss = 3.21041;
  r.lr = 3e-4;
  r.step_ms = 412.34;
  r.tokens_per_s = 9920.4;
  EXPECT_EQ(format_step_line(r, 100), "step 12/100 | loss 3.2104 | lr 3.0e-04 | 412.3 ms | 9920 tok/s");
  r.tflops = 0.0123;
  r.mfu_pct = 41.23;
  r.memory_bytes = int64_t{3} << 29;
  r.comm_ms = 30.12;
  r.exposed_comm_ms = 12.0;
  r.overlap_pct = 60.2;
  const std::regex full(
      R"(step \d+/\d+ \| loss \d+\.\d{4} \| lr \d\.\de[-+]\d\d \| \d+\.\d ms \| \d+ tok/s \| [\d.e+-]+ TFLOPS \| )"
      R"(mfu \d+\.\d% \| mem \d+\.\d\d GiB \| comm \d+\.\d ms, \d+\.\d exposed \(overlap \d+%\))");
  const std::string line = format_step_line(r, 100);
  EXPECT_TRUE(std::regex_match(line, full)) << line;
  EXPECT_NE(line.find("mem 1.50 GiB"), std::string::npos) << line;
  r.skipped = true;
  EXPECT_NE(format_step_line(r, 100).find("| skipped: non-finite gradients"), std::string::npos);
}

}  // namespace
}  // namespace dtlab
