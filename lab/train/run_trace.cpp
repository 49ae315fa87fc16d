// run_trace.cpp: a training run's trace (see run_trace.hpp).
#include "lab/train/run_trace.hpp"

#include "lab/comm/comm.hpp"
#include "lab/instrument/clock.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/results_schema.hpp"
#include "lab/world.hpp"

namespace dtlab {

RunTrace::RunTrace(const Config& config, World& world, bool enabled) {
  if (!enabled) return;
  const std::string backend = world.world_size() == 1             ? "none"
                              : config.parallel.backend == "auto" ? "gloo"  // CPU tensors (see make_world)
                                                                  : config.parallel.backend;
  trace_ = std::make_unique<TraceWriter>(world.rank(), world.world_size(), backend);
  trace_->thread_name(trace_tid::kMain, "main thread (phases)");
  int64_t tid = trace_tid::kCommGroupBase;
  for (Comm* comm : world.all_comms()) {
    comm_tid_[comm->group_name()] = tid;
    trace_->thread_name(tid++, "collectives " + comm->group_name());
  }
  if (config.instrument.cupti != "off") device_kernels_ = cupti_.start();
  if (!device_kernels_) trace_->thread_name(trace_tid::kCompute, "compute (the CPU as HTA's device stream)");
}

void RunTrace::compute(const std::vector<Interval>& intervals) {
  if (!trace_ || device_kernels_) return;
  const double trace_start_us = lab_clock_us();
  for (const Interval& c : intervals) {
    trace_->span("compute", trace_cat::kCpuCompute, trace_tid::kCompute, c.start, c.length(),
                 {{"stream", trace_tid::kCompute}});
  }
  StepProfiler::instance().add_trace_us(lab_clock_us() - trace_start_us);
}

void RunTrace::collective(const nlohmann::json& record) {
  if (!trace_) return;
  const double trace_start_us = lab_clock_us();
  const std::string group = record["group"];
  const auto lane = comm_tid_.find(group);  // 99: a communicator created after setup
  const int64_t tid = lane != comm_tid_.end() ? lane->second : trace_tid::kCommGroupBase - 1;
  nlohmann::json args = record;
  if (!device_kernels_) args["stream"] = tid;  // a CPU run: HTA reads the lane as a communication stream
  trace_->span(collective_span_name(record["op"], record["tag"]), trace_cat::kCpuOp, tid,
               record[schema::kStartUs].get<double>(), record[schema::kTimeUs].get<double>(), std::move(args));
  StepProfiler::instance().add_trace_us(lab_clock_us() - trace_start_us);
}

void RunTrace::finish(const std::string& path) {
  if (!trace_) return;
  cupti_.stop_into(*trace_);
  trace_->write(path);
}

}  // namespace dtlab
