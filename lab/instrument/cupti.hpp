// cupti.hpp: GPU activity (kernels, NCCL kernels, memcpy, memset) from CUPTI, written into the rank's trace.
//
// Usage:
//   CuptiCollector cupti;
//   const bool on = cupti.start();     // false: one line on stderr, e.g. "cupti: unavailable: no CUDA device"
//   ... train ...
//   if (on) cupti.stop_into(trace);    // flush CUPTI's buffers, one "X" event per record
//
// In the cpu configuration start() prints "cupti: unavailable: not built with CUDA"; in the cuda configuration
// on a machine without a device, "cupti: unavailable: no CUDA device". Either line is printed once per process;
// training continues without GPU activity in the trace.
//
// Events: pid = rank, tid = trace_tid::kStreamBase + CUDA stream id (thread_name "stream N"), cat "kernel"
// (NCCL's kernels are the ones named nccl*), "gpu_memcpy" or "gpu_memset", args {device, context, stream,
// correlation, ...} as Kineto writes them, so HTA's kernel and overlap analyses can read them.
//
// Clock: CUPTI is given the lab clock (cuptiActivityRegisterTimestampCallback with lab_clock_us() in ns), so
// record timestamps are lab-clock ns and ts = start / 1000 needs no conversion; CUPTI itself maps GPU
// timestamps to this CPU clock. If registration fails (older CUPTI), start() samples cuptiGetTimestamp() against
// the lab clock once and subtracts that offset from every record.
//
// CUPTI's activity API is process-wide: one collector may run at a time (a second start() returns false).
#pragma once

namespace dtlab {

class TraceWriter;

class CuptiCollector {
 public:
  CuptiCollector() = default;
  ~CuptiCollector();  // stops collection if still running (records are dropped)
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // Enables CONCURRENT_KERNEL, MEMCPY and MEMSET activity. Returns false (after one stderr line per process)
  // when CUPTI cannot run here.
  bool start();
  // Flushes and disables collection, then appends the records and the device properties to `trace`.
  // A no-op when start() returned false. Prints one stderr line if CUPTI dropped records.
  void stop_into(TraceWriter& trace);

 private:
  bool running_ = false;
};

}  // namespace dtlab
