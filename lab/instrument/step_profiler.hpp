// step_profiler.hpp: where a training step's time goes, by phase — timed on the main thread.
//
//   StepProfiler& prof = StepProfiler::instance();
//   prof.begin_step(12);
//   { ScopedPhase p(Phase::forward, "forward-compute"); ... }   // strategies mark forward / backward
//   { ScopedPhase w(Phase::comm_wait, "grads-all-reduce"); h.wait(); }   // lab/comm marks every blocking wait
//   prof.end_step();
//   PhaseTimes ms = prof.phase_ms();   // exclusive milliseconds per phase; `other` = the rest of the step
//
// Phases nest: a wait inside backward is charged to comm_wait and not to backward (exclusive time), so
// the phases of a step add up to its duration. Spans are recorded only on the thread that called
// begin_step and only inside a step; elsewhere ScopedPhase just emits its NVTX range. Names follow
// Megatron-LM's timer vocabulary (forward-compute, backward-compute, params-all-gather,
// grads-reduce-scatter, grads-all-reduce, optimizer-step), optionally followed by a unit, e.g.
// "params-all-gather fsdp.params.unit2". With a TraceWriter attached, every span also becomes a trace
// event (tid 0) and each top-level span end samples tensor memory as a counter.
//
// Clock: the lab's steady clock on CPU. In cuda builds on a machine with a CUDA device, every span also records
// a CUDA event pair on the current stream, and phase_ms() reports the event-timed (device) durations;
// phase_clock() says which clock the figures came from. Spans (start_us/end_us) stay on the host clock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lab/instrument/cuda_events.hpp"
#include "lab/instrument/gpu.hpp"

namespace dtlab {

class TraceWriter;

enum class Phase : int { data = 0, forward, backward, comm_wait, optimizer, other };
inline constexpr int kPhaseCount = 6;
// result.json key of a phase: data | forward | backward | comm_wait | optimizer | other
const char* phase_key(Phase phase);
using PhaseTimes = std::array<double, kPhaseCount>;  // milliseconds, indexed by Phase

struct PhaseSpan {
  Phase phase;
  std::string name;
  double start_us = 0, end_us = 0;  // lab clock (lab/instrument/clock.hpp)
  int depth = 0;                    // 0 = top level
};

class StepProfiler {
 public:
  static StepProfiler& instance();

  // nvtx: push NVTX ranges (cuda build); trace: also record spans and memory counters (may be null;
  // must outlive the profiler's use of it — detach with configure(nvtx, nullptr)).
  void configure(bool nvtx, TraceWriter* trace);
  bool nvtx() const { return nvtx_; }

  void begin_step(int64_t step);  // the calling thread becomes the profiled thread
  void end_step();                // closes the step; phase_ms() and spans() then describe it
  int64_t step() const { return step_; }
  double step_start_us() const { return step_start_us_; }
  double step_end_us() const { return step_end_us_; }
  const std::vector<PhaseSpan>& spans() const { return spans_; }  // the step's spans in end order
  PhaseTimes phase_ms() const;
  const char* phase_clock() const { return device_timed_ ? "cuda_events" : "steady_clock"; }
  // Time spent writing trace events for the current step (milliseconds): the direct cost of tracing.
  // Callers that trace outside the profiler (the trainer's collective records) add theirs.
  double trace_ms() const { return trace_us_ / 1000.0; }
  void add_trace_us(double us) { trace_us_ += us; }

  // Used by ScopedPhase.
  bool recording_here() const;
  void push(Phase phase, std::string name);
  void pop();

 private:
  struct Frame {
    Phase phase;
    std::string name;
    double start_us;
    double child_us = 0;
    int start_event = -1;
  };
  struct DeviceSpan {  // event indices of a finished span, in end order
    Phase phase;
    int depth, start_event, end_event;
  };
  void time_on_device();  // end_step: exclusive device times from the event pairs
  bool nvtx_ = true;
  TraceWriter* trace_ = nullptr;
  std::thread::id thread_;
  bool in_step_ = false;
  std::atomic<int64_t> step_{0};  // read by the progress board's heartbeat thread
  double step_start_us_ = 0, step_end_us_ = 0;
  std::vector<Frame> stack_;
  std::vector<PhaseSpan> spans_;
  std::array<double, kPhaseCount> exclusive_us_{};
  double trace_us_ = 0;
  std::unique_ptr<CudaEventTimeline> events_;  // null on CPU-only machines
  bool events_checked_ = false;
  std::vector<DeviceSpan> device_spans_;
  int step_start_event_ = -1;
  bool device_timed_ = false;
  double device_step_ms_ = 0;
  std::array<double, kPhaseCount> device_exclusive_ms_{};
};

// RAII phase span (see StepProfiler). Cheap when not recording: no allocation beyond the name.
class ScopedPhase {
 public:
  ScopedPhase(Phase phase, std::string name);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  bool recorded_ = false;
  std::optional<NvtxRange> nvtx_;
};

// The Megatron name of a blocking wait on a collective, from its op and the caller's tag:
// all_gather of parameters -> "params-all-gather", reduce_scatter -> "grads-reduce-scatter", gradient
// all_reduce -> "grads-all-reduce", anything else "<op>"; followed by " <tag>" when there is a tag.
std::string collective_span_name(const std::string& op, const std::string& tag);

}  // namespace dtlab
