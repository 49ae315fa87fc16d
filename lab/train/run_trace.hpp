// run_trace.hpp: a training run's Chrome/Perfetto trace (instrument.trace) — one writer per rank, the lanes of
// lab/instrument/trace.hpp (the main thread's phases, one lane per communicator for its collectives, CUDA streams
// from CUPTI) and the file it ends as (rank<r>/trace.json.gz).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/instrument/cupti.hpp"
#include "lab/instrument/overlap.hpp"
#include "lab/instrument/trace.hpp"

namespace dtlab {

class World;

class RunTrace {
 public:
  // Traces when `enabled` (instrument.trace and a results directory); otherwise every call below does nothing.
  RunTrace(const Config& config, World& world, bool enabled);
  TraceWriter* writer() const { return trace_.get(); }  // nullptr when not tracing
  // One collective record (lab/instrument/step_analysis.hpp) as a span on its communicator's lane; the time spent
  // writing it is charged to the step profiler's trace time.
  void collective(const nlohmann::json& record);
  // A CPU run's compute intervals of one step (lab/instrument/step_analysis.hpp compute_intervals) on the compute
  // lane, with args.stream so HTA analyses them as kernels (lab/instrument/trace.hpp). Nothing when CUPTI records
  // the device's own kernels.
  void compute(const std::vector<Interval>& intervals);
  // Appends CUPTI's activity and writes `path`.
  void finish(const std::string& path);

 private:
  std::unique_ptr<TraceWriter> trace_;
  std::map<std::string, int64_t> comm_tid_;
  CuptiCollector cupti_;
  bool device_kernels_ = false;  // CUPTI is recording kernels: they, not the CPU lanes, are HTA's streams
};

}  // namespace dtlab
