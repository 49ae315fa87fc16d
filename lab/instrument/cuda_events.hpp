// cuda_events.hpp: phase timing by CUDA events (cuda builds with a device) — the device-side clock of
// StepProfiler.
//
//   auto events = CudaEventTimeline::create_if_device();   // nullptr: cpu build, or no CUDA device
//   int a = events->record(); ...work...; int b = events->record();
//   double ms = events->elapsed_ms(a, b);                   // waits for event b
//   events->reset();                                        // reuse the events for the next step
//
// Events are recorded on the current stream of the current device and pooled (created once, reused).
#pragma once

#include <memory>

namespace dtlab {

class CudaEventTimeline {
 public:
  static std::unique_ptr<CudaEventTimeline> create_if_device();
  ~CudaEventTimeline();
  CudaEventTimeline(const CudaEventTimeline&) = delete;
  CudaEventTimeline& operator=(const CudaEventTimeline&) = delete;

  int record();
  double elapsed_ms(int from, int to);
  void reset();

 private:
  CudaEventTimeline();
  struct Pool;
  std::unique_ptr<Pool> pool_;
};

}  // namespace dtlab
