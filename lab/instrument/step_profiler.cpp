// step_profiler.cpp: phase spans, exclusive phase times, NVTX and trace emission (see step_profiler.hpp).
#include "lab/instrument/step_profiler.hpp"

#include <numeric>

#include "lab/instrument/clock.hpp"
#include "lab/instrument/trace.hpp"
#include "lab/memory.hpp"

namespace dtlab {

const char* phase_key(Phase phase) {
  switch (phase) {
    case Phase::data:
      return "data";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::comm_wait:
      return "comm_wait";
    case Phase::optimizer:
      return "optimizer";
    case Phase::other:
      return "other";
  }
  return "other";
}

StepProfiler& StepProfiler::instance() {
  static StepProfiler profiler;
  return profiler;
}

void StepProfiler::configure(bool nvtx, TraceWriter* trace) {
  nvtx_ = nvtx;
  trace_ = trace;
  if (!events_checked_) {  // once per process: is there a device to time on?
    events_ = CudaEventTimeline::create_if_device();
    events_checked_ = true;
  }
}

void StepProfiler::begin_step(int64_t step) {
  thread_ = std::this_thread::get_id();
  in_step_ = true;
  step_ = step;
  stack_.clear();
  spans_.clear();
  exclusive_us_.fill(0.0);
  trace_us_ = 0;
  device_spans_.clear();
  device_timed_ = false;
  if (events_) {
    events_->reset();
    step_start_event_ = events_->record();
  }
  step_start_us_ = lab_clock_us();
}

void StepProfiler::end_step() {
  step_end_us_ = lab_clock_us();
  while (!stack_.empty()) pop();  // a phase left open by an exception path; close it at the step's end
  in_step_ = false;
  if (events_) time_on_device();
  if (trace_) {
    const double trace_start_us = lab_clock_us();
    trace_->span("ProfilerStep#" + std::to_string(step_), trace_cat::kUserAnnotation, trace_tid::kMain, step_start_us_,
                 step_end_us_ - step_start_us_);
    trace_us_ += lab_clock_us() - trace_start_us;
  }
}

void StepProfiler::time_on_device() {
  const int step_end_event = events_->record();
  device_step_ms_ = events_->elapsed_ms(step_start_event_, step_end_event);  // waits for the step's device work
  device_exclusive_ms_.fill(0.0);
  // Children end before their parent: per depth, the durations of finished children not yet charged to a parent.
  std::vector<double> children_ms;
  for (const DeviceSpan& d : device_spans_) {
    const size_t depth = static_cast<size_t>(d.depth);
    if (children_ms.size() < depth + 2) children_ms.resize(depth + 2, 0.0);
    const double ms = events_->elapsed_ms(d.start_event, d.end_event);
    device_exclusive_ms_[static_cast<int>(d.phase)] += std::max(0.0, ms - children_ms[depth + 1]);
    children_ms[depth + 1] = 0.0;
    children_ms[depth] += ms;
  }
  device_timed_ = true;
}

PhaseTimes StepProfiler::phase_ms() const {
  if (device_timed_) {
    PhaseTimes ms = device_exclusive_ms_;
    const double covered = std::accumulate(ms.begin(), ms.end(), 0.0) - ms[static_cast<int>(Phase::other)];
    ms[static_cast<int>(Phase::other)] += std::max(0.0, device_step_ms_ - covered);
    return ms;
  }
  PhaseTimes ms{};
  for (int p = 0; p < kPhaseCount; ++p) ms[p] = exclusive_us_[p] / 1000.0;
  const double step_ms = (step_end_us_ - step_start_us_) / 1000.0;
  const double covered = std::accumulate(ms.begin(), ms.end(), 0.0) - ms[static_cast<int>(Phase::other)];
  ms[static_cast<int>(Phase::other)] += std::max(0.0, step_ms - covered);
  return ms;
}

bool StepProfiler::recording_here() const { return in_step_ && std::this_thread::get_id() == thread_; }

void StepProfiler::push(Phase phase, std::string name) {
  stack_.push_back({phase, std::move(name), lab_clock_us(), 0.0, events_ ? events_->record() : -1});
}

void StepProfiler::pop() {
  if (stack_.empty()) return;
  const double end_us = lab_clock_us();
  Frame frame = std::move(stack_.back());
  stack_.pop_back();
  const double dur_us = end_us - frame.start_us;
  exclusive_us_[static_cast<int>(frame.phase)] += std::max(0.0, dur_us - frame.child_us);
  if (!stack_.empty()) stack_.back().child_us += dur_us;
  if (events_)
    device_spans_.push_back({frame.phase, static_cast<int>(stack_.size()), frame.start_event, events_->record()});
  if (trace_) {
    const double trace_start_us = lab_clock_us();
    trace_->span(frame.name, trace_cat::kUserAnnotation, trace_tid::kMain, frame.start_us, dur_us,
                 {{"phase", phase_key(frame.phase)}});
    if (stack_.empty()) {
      trace_->counter("cpu tensor memory", end_us,
                      {{"allocated_bytes", static_cast<double>(cpu_tensor_memory().current_bytes)}});
    }
    trace_us_ += lab_clock_us() - trace_start_us;
  }
  spans_.push_back({frame.phase, std::move(frame.name), frame.start_us, end_us, static_cast<int>(stack_.size())});
}

ScopedPhase::ScopedPhase(Phase phase, std::string name) {
  StepProfiler& prof = StepProfiler::instance();
  if (prof.nvtx()) nvtx_.emplace(name.c_str());
  if (prof.recording_here()) {
    prof.push(phase, std::move(name));
    recorded_ = true;
  }
}

ScopedPhase::~ScopedPhase() {
  if (recorded_) StepProfiler::instance().pop();
}

std::string collective_span_name(const std::string& op, const std::string& tag) {
  const bool grads = tag.find(".bucket.") != std::string::npos || tag.find("grads") != std::string::npos ||
                     tag.find("replicas") != std::string::npos;
  std::string name = op;
  if (op == "all_gather" && tag.find("params") != std::string::npos) {
    name = "params-all-gather";
  } else if (op == "reduce_scatter") {
    name = "grads-reduce-scatter";
  } else if (op == "all_reduce" && grads) {
    name = "grads-all-reduce";
  }
  return tag.empty() ? name : name + " " + tag;
}

}  // namespace dtlab
