// trace.hpp: a Chrome/Perfetto trace per rank, in the Kineto-like shape Holistic Trace Analysis loads (torch-free).
//
// Usage:
//   TraceWriter trace(rank, world_size, "gloo");
//   trace.thread_name(0, "main");
//   const double t0 = lab_clock_us();                    // lab/instrument/clock.hpp
//   ...
//   trace.span("ProfilerStep#3", trace_cat::kUserAnnotation, trace_tid::kMain, t0, lab_clock_us() - t0);
//   trace.counter("memory", lab_clock_us(), {{"allocated_bytes", n}});
//   trace.write(out_dir + "/rank0/trace.json.gz");   // open in ui.perfetto.dev or chrome://tracing
//
// Document written (one per rank):
//   {"schemaVersion": 1, "distributedInfo": {"backend", "rank", "world_size"}, "deviceProperties": [...],
//    "displayTimeUnit": "ms", "baseTimeNanoseconds": <Unix time in ns of ts 0>, "traceEvents": [...]}
// Every event carries ph, name, pid (= rank), tid and ts (µs); "X" events also cat and dur. "M" events name the
// process ("rank r") and each thread lane. Times are rounded to the nanosecond.
//
// Clock: ts is microseconds on the lab clock (lab/instrument/clock.hpp: steady clock since the process's first
// reading, lab_clock_us()). baseTimeNanoseconds is lab_clock_epoch_unix_ns(), the Unix time of the lab clock's
// zero, so HTA's unix_ns = ts * 1000 + baseTimeNanoseconds holds, and merge_traces() lines ranks up by it (each
// process has its own zero; the pairing of steady and system clock at that zero is good to well under 1 µs).
//
// Categories: use the names Kineto writes and HTA filters on (trace_cat below): ProfilerStep#N and phase spans
// are "user_annotation", CPU-side ops "cpu_op", CUPTI records "kernel" / "gpu_memcpy" / "gpu_memset" with
// args {"device", "stream", "correlation"}. Lanes (tid): 0 = main thread, 50 = the step's compute on a CPU run,
// 100 + g = communication group g, 1000 + s = CUDA stream s (trace_tid below).
// HTA's analyses (temporal breakdown, communication/computation overlap) read only events with args.stream, the
// GPU's kernels. On a CPU run the compute lane (the intervals dtlab's own overlap figure uses, cat "cpu_compute")
// and the collective spans carry args.stream = their lane, so HTA sees the CPU as the device it analyses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab {

namespace trace_cat {
inline constexpr const char* kUserAnnotation = "user_annotation";         // ProfilerStep#N, phases (CPU side)
inline constexpr const char* kGpuUserAnnotation = "gpu_user_annotation";  // phase ranges projected on a stream
inline constexpr const char* kCpuOp = "cpu_op";                           // host-side operators, collectives
inline constexpr const char* kCpuCompute = "cpu_compute";                 // CPU runs: the compute lane
inline constexpr const char* kCudaRuntime = "cuda_runtime";               // cudaLaunchKernel, cudaMemcpyAsync, ...
inline constexpr const char* kKernel = "kernel";                          // CUPTI kernel records (nccl* too)
inline constexpr const char* kGpuMemcpy = "gpu_memcpy";
inline constexpr const char* kGpuMemset = "gpu_memset";
}  // namespace trace_cat

namespace trace_tid {
inline constexpr int64_t kMain = 0;
inline constexpr int64_t kCompute = 50;         // CPU runs: the step's compute intervals (lab/instrument/step_analysis)
inline constexpr int64_t kCommGroupBase = 100;  // + group index
inline constexpr int64_t kStreamBase = 1000;    // + CUDA stream id
}  // namespace trace_tid

class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thread-safe: every method may be called from any thread.
class TraceWriter {
 public:
  // backend: "gloo" | "nccl" | "none" (single process). REQUIRES: 0 <= rank < world_size.
  TraceWriter(int rank, int world_size, std::string backend);

  // Kineto's deviceProperties array (one object per GPU: id, name, totalGlobalMem, ...); [] on CPU.
  void set_device_properties(nlohmann::json devices);

  void thread_name(int64_t tid, const std::string& name);  // "M" thread_name (+ thread_sort_index = tid)
  void span(const std::string& name, const std::string& cat, int64_t tid, double start_us, double dur_us,
            nlohmann::json args = {});                                         // "X"; negative dur is clamped to 0
  void counter(const std::string& name, double ts_us, nlohmann::json values);  // "C", values: {"series": number}
  void instant(const std::string& name, int64_t tid, double ts_us, nlohmann::json args = {});  // "i", thread scope

  size_t event_count() const;  // events recorded so far, metadata included
  int rank() const { return rank_; }

  nlohmann::json to_json() const;  // the document above; metadata first, then events sorted by ts
  // path ending in ".gz" -> gzip (zlib), else plain JSON. Creates parent dirs. Throws TraceError naming the path.
  void write(const std::string& path) const;

 private:
  void push(nlohmann::json event);

  const int rank_;
  const int world_size_;
  const std::string backend_;
  const int64_t base_time_ns_;
  mutable std::mutex mutex_;
  nlohmann::json device_properties_ = nlohmann::json::array();
  // Events serialized as they arrive, comma-separated, in one growing buffer: a long run's thousands of events
  // must not live as many small heap objects among the training's large buffers. Held as JSON objects, they
  // fragmented the heap so badly under FSDP's per-step free and re-gather of unit storage that a 20-step run's
  // RSS doubled (557 -> 1107 MB) and steps were ~3% slower. to_json() parses them back once.
  std::string events_text_;
  size_t event_count_ = 0;
};

// Reads a trace written by TraceWriter or by the PyTorch profiler: gzip or plain JSON (detected from the bytes).
// Throws TraceError naming the file when it cannot be read, is not JSON, or has no "traceEvents" array.
nlohmann::json read_trace(const std::string& path);

// One document for all ranks: every rank's events (pid = its rank, times re-based to the earliest
// baseTimeNanoseconds), sorted by ts with metadata first. distributedInfo stays loadable by HTA: "rank" is the
// lowest rank present, "world_size" the job's, plus "ranks": [r...] and "merged": true; "rankInfo" keeps each
// input's own distributedInfo. deviceProperties are concatenated with a "rank" field added to each.
// NOTE: the merged file is for one Perfetto timeline of the job; HTA reads it as a single rank. For HTA's
// cross-rank analyses give it the per-rank files: TraceAnalysis(trace_files={r: ".../rank<r>/trace.json.gz"}).
// Throws TraceError if the list is empty, an input has no distributedInfo.rank, or two inputs share a rank.
nlohmann::json merge_traces(const std::vector<nlohmann::json>& rank_traces);

// The document as written: Kineto's layout (a top-level key per line, distributedInfo as `"rank": R` with a space,
// which is how HTA reads a file's rank; one event per line). Parses back to `doc`.
std::string trace_text(const nlohmann::json& doc);
// write() for any document (the merged one): trace_text, ".gz" -> gzip. Throws TraceError naming the path.
void write_trace_json(const nlohmann::json& doc, const std::string& path);

// The trace files named by `inputs` (what `dtlab trace merge` takes): a file is taken as is; a directory
// contributes <dir>/rank<r>/trace.json.gz (or trace.json) for every rank dir, in rank order.
// Throws TraceError naming the input when it does not exist or a directory holds no rank trace.
std::vector<std::string> find_trace_files(const std::vector<std::string>& inputs);

// `dtlab trace merge INPUT... -o OUT`: find_trace_files + read_trace + merge_traces + write_trace_json.
// Returns one line for the user: "merged 2 ranks (1234 events) from 2 files -> OUT".
std::string merge_trace_files(const std::vector<std::string>& inputs, const std::string& out_path);

}  // namespace dtlab
