// step_analysis.cpp: overlap, bandwidth and timeline figures of one step (see step_analysis.hpp).
#include "lab/instrument/step_analysis.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "lab/results_schema.hpp"
#include "lab/stats.hpp"

namespace dtlab {

namespace {

bool is_compute(Phase p) { return p == Phase::forward || p == Phase::backward || p == Phase::optimizer; }

std::vector<Interval> spans_of(const std::vector<PhaseSpan>& spans, bool (*keep)(Phase)) {
  std::vector<Interval> out;
  for (const PhaseSpan& s : spans)
    if (keep(s.phase)) out.push_back({s.start_us, s.end_us});
  return merge(std::move(out));
}

}  // namespace

std::vector<Interval> compute_intervals(const std::vector<PhaseSpan>& spans) {
  return subtract(spans_of(spans, is_compute), spans_of(spans, [](Phase p) { return p == Phase::comm_wait; }));
}

StepComm analyse_step_comm(const std::vector<PhaseSpan>& spans, const std::vector<CollectiveRecord>& records,
                           int64_t step, double step_end_us) {
  namespace k = schema;
  const std::vector<Interval> compute = compute_intervals(spans);
  StepComm out;
  std::vector<Interval> comm;
  for (const CollectiveRecord& r : records) {
    const double end_us = r.end_us > 0 ? r.end_us : std::max(r.start_us, step_end_us);
    const Interval iv{r.start_us, end_us};
    comm.push_back(iv);
    const double time_us = iv.length();
    const double overlapped_us = covered_length(iv, compute);
    const double algbw = time_us > 0 ? static_cast<double>(r.bytes) / (time_us * 1e3) : 0.0;  // bytes/us -> GB/s
    out.records.push_back({{k::kSeq, r.seq},
                           {k::kStep, step},
                           {"op", r.op},
                           {"algorithm", r.algorithm},
                           {"dtype", r.dtype},
                           {"bytes", r.bytes},
                           {"group_size", r.group_size},
                           {"group", r.group},
                           {"level", r.level},
                           {"tag", r.tag},
                           {k::kStartUs, r.start_us},
                           {k::kEndUs, end_us},
                           {k::kTimeUs, time_us},
                           {k::kAlgbwGBps, algbw},
                           {k::kBusbwGBps, algbw * busbw_factor(r.op, r.group_size)},
                           {k::kExposedUs, time_us - overlapped_us},
                           {k::kOverlappedUs, overlapped_us}});
  }
  const OverlapSplit split = split_overlap(comm, compute);
  out.comm_ms = split.comm_us / 1000.0;
  out.exposed_ms = split.exposed_us / 1000.0;
  out.overlap_pct = split.overlap_pct();
  return out;
}

nlohmann::json step_timeline(int rank, int64_t step, double step_start_us, double step_end_us,
                             const std::vector<PhaseSpan>& spans, const nlohmann::json& comm_records) {
  nlohmann::json lanes = nlohmann::json::array();
  auto add = [&](const char* lane, const std::string& name, double start_us, double end_us) {
    if (end_us <= start_us) return;
    lanes.push_back(
        {{"lane", lane}, {"name", name}, {"start_us", start_us - step_start_us}, {"end_us", end_us - step_start_us}});
  };
  // Compute pieces, named after the top-level phase span they fall in.
  const std::vector<Interval> compute = compute_intervals(spans);
  for (const PhaseSpan& top : spans) {
    if (top.depth != 0) continue;
    if (top.phase == Phase::data) add("data", top.name, top.start_us, top.end_us);
    if (!is_compute(top.phase)) continue;
    for (const Interval& c : compute) {
      const double s = std::max(c.start, top.start_us), e = std::min(c.end, top.end_us);
      add(top.phase == Phase::optimizer ? "optimizer" : "compute", top.name, s, e);
    }
  }
  for (const PhaseSpan& s : spans)
    if (s.phase == Phase::comm_wait) add("wait", s.name, s.start_us, s.end_us);
  for (const auto& r : comm_records)
    add("comm", r["op"].get<std::string>() + " " + r["tag"].get<std::string>(), r[schema::kStartUs].get<double>(),
        r[schema::kEndUs].get<double>());
  return {{"rank", rank}, {"step", step}, {"step_ms", (step_end_us - step_start_us) / 1000.0}, {"spans", lanes}};
}

nlohmann::json distribution(const std::vector<double>& values) {
  if (values.empty()) return {{"min", 0.0}, {"max", 0.0}, {"mean", 0.0}, {"median", 0.0}, {"p95", 0.0}};
  const Stats s = summarize(values);
  return {{"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"median", s.median}, {"p95", s.p95}};
}

double process_cpu_seconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return 0.0;
  // Fields after the parenthesised command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0.0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace dtlab
