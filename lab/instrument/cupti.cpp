// cupti.cpp: CUPTI activity collection into the rank's trace (see cupti.hpp).
#include "lab/instrument/cupti.hpp"

#include <atomic>
#include <cstdio>
#include <string>

#include "lab/instrument/trace.hpp"

#ifdef DTLAB_WITH_CUDA
#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "lab/instrument/clock.hpp"

// Throws with file:line, the call and CUPTI's own message.
#define CUPTI_CHECK(expr)                                                                                     \
  do {                                                                                                        \
    const CUptiResult status_ = (expr);                                                                       \
    if (status_ != CUPTI_SUCCESS) {                                                                           \
      const char* message_ = "unknown CUPTI error";                                                           \
      cuptiGetResultString(status_, &message_);                                                               \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #expr + ": " + \
                               message_);                                                                     \
    }                                                                                                         \
  } while (0)
#endif

namespace dtlab {
namespace {

// The "unavailable" line, printed at most once per process.
void report_unavailable(const std::string& why) {
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true)) std::fprintf(stderr, "cupti: unavailable: %s\n", why.c_str());
}

#ifdef DTLAB_WITH_CUDA

enum class GpuKind { kernel, memcpy, memset };

// One CUPTI record, copied out of CUPTI's buffer (which is freed as soon as it is read).
struct GpuRecord {
  GpuKind kind = GpuKind::kernel;
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;  // CUPTI timestamps (lab clock when the timestamp callback is registered)
  uint32_t device = 0, context = 0, stream = 0, correlation = 0;
  uint64_t bytes = 0;                                 // memcpy, memset
  int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};  // kernel
  uint16_t registers_per_thread = 0;
  int32_t shared_memory_bytes = 0;
};

constexpr size_t kBufferBytes = 4u << 20;  // per CUPTI buffer; CUPTI asks for more as they fill

std::atomic<bool> g_active{false};  // CUPTI's activity API is process-wide: one collector at a time
std::mutex g_mutex;                 // guards the two below (buffer callbacks run on CUPTI's thread)
std::vector<GpuRecord> g_records;
size_t g_dropped = 0;
int64_t g_offset_ns = 0;  // CUPTI timestamp - lab clock ns; 0 when CUPTI uses our timestamp callback

uint64_t CUPTIAPI lab_clock_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                                    detail::lab_clock_epoch().steady)
                                   .count());
}

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

const char* copy_kind_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    default:
      return "Unknown";
  }
}

const char* memory_kind_name(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed Static";
    default:
      return "Unknown";
  }
}

// Record layouts are the newest of this toolkit's headers (CUDA 13: Kernel10, Memcpy6, Memset4); CUPTI fills
// the layout of the header it was built with, and the cuda configuration uses the toolkit's own libcupti.
bool to_record(const CUpti_Activity* activity, GpuRecord& out) {
  switch (activity->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
      out.kind = GpuKind::kernel;
      out.name = demangle(k->name);
      out.start_ns = k->start, out.end_ns = k->end;
      out.device = k->deviceId, out.context = k->contextId, out.stream = k->streamId;
      out.correlation = k->correlationId;
      out.grid[0] = k->gridX, out.grid[1] = k->gridY, out.grid[2] = k->gridZ;
      out.block[0] = k->blockX, out.block[1] = k->blockY, out.block[2] = k->blockZ;
      out.registers_per_thread = k->registersPerThread;
      out.shared_memory_bytes = k->staticSharedMemory + k->dynamicSharedMemory;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(activity);
      out.kind = GpuKind::memcpy;
      out.name = std::string("Memcpy ") + copy_kind_name(m->copyKind) + " (" + memory_kind_name(m->srcKind) + " -> " +
                 memory_kind_name(m->dstKind) + ")";
      out.start_ns = m->start, out.end_ns = m->end;
      out.device = m->deviceId, out.context = m->contextId, out.stream = m->streamId;
      out.correlation = m->correlationId, out.bytes = m->bytes;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(activity);
      out.kind = GpuKind::memset;
      out.name = std::string("Memset (") + memory_kind_name(m->memoryKind) + ")";
      out.start_ns = m->start, out.end_ns = m->end;
      out.device = m->deviceId, out.context = m->contextId, out.stream = m->streamId;
      out.correlation = m->correlationId, out.bytes = m->bytes;
      return true;
    }
    default:
      return false;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                               size_t valid_bytes) {
  std::vector<GpuRecord> records;
  CUpti_Activity* activity = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &activity) == CUPTI_SUCCESS) {
    GpuRecord r;
    if (to_record(activity, r)) records.push_back(std::move(r));
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& r : records) g_records.push_back(std::move(r));
  g_dropped += dropped;
}

const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET};

void disable_kinds() {
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
}

// Kineto's deviceProperties entry for one device.
nlohmann::json device_properties(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return {{"id", device}};
  return {{"id", device},
          {"name", p.name},
          {"totalGlobalMem", p.totalGlobalMem},
          {"computeMajor", p.major},
          {"computeMinor", p.minor},
          {"maxThreadsPerBlock", p.maxThreadsPerBlock},
          {"maxThreadsPerMultiprocessor", p.maxThreadsPerMultiProcessor},
          {"regsPerBlock", p.regsPerBlock},
          {"regsPerMultiprocessor", p.regsPerMultiprocessor},
          {"warpSize", p.warpSize},
          {"sharedMemPerBlock", p.sharedMemPerBlock},
          {"sharedMemPerMultiprocessor", p.sharedMemPerMultiprocessor},
          {"numSms", p.multiProcessorCount},
          {"sharedMemPerBlockOptin", p.sharedMemPerBlockOptin}};
}

#endif  // DTLAB_WITH_CUDA

}  // namespace

CuptiCollector::~CuptiCollector() {
#ifdef DTLAB_WITH_CUDA
  if (running_) {
    disable_kinds();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.clear();
    g_active = false;
  }
#endif
}

bool CuptiCollector::start() {
#ifndef DTLAB_WITH_CUDA
  report_unavailable("not built with CUDA");
  return false;
#else
  if (running_) return true;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    report_unavailable("no CUDA device");
    return false;
  }
  if (g_active.exchange(true)) {
    report_unavailable("another CuptiCollector is already collecting in this process");
    return false;
  }
  try {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_records.clear();
      g_dropped = 0;
    }
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    // Before enabling any kind, so every record is stamped by the lab clock.
    if (cuptiActivityRegisterTimestampCallback(lab_clock_ns) == CUPTI_SUCCESS) {
      g_offset_ns = 0;
    } else {
      uint64_t cupti_now = 0;
      CUPTI_CHECK(cuptiGetTimestamp(&cupti_now));
      g_offset_ns = static_cast<int64_t>(cupti_now) - static_cast<int64_t>(lab_clock_ns());
    }
    for (CUpti_ActivityKind kind : kKinds) CUPTI_CHECK(cuptiActivityEnable(kind));
  } catch (const std::exception& e) {
    disable_kinds();
    g_active = false;
    report_unavailable(e.what());
    return false;
  }
  running_ = true;
  return true;
#endif
}

void CuptiCollector::stop_into(TraceWriter& trace) {
#ifdef DTLAB_WITH_CUDA
  if (!running_) return;
  running_ = false;
  cudaDeviceSynchronize();  // kernels still in flight would be missing from a forced flush
  cuptiActivityFlushAll(0);
  disable_kinds();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<GpuRecord> records;
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    records.swap(g_records);
    dropped = g_dropped;
  }
  g_active = false;
  if (dropped > 0) {
    std::fprintf(stderr, "cupti: rank %d: %zu activity records dropped (buffers full)\n", trace.rank(), dropped);
  }

  std::set<uint32_t> streams, devices;
  for (const GpuRecord& r : records) {
    if (streams.insert(r.stream).second) {
      trace.thread_name(trace_tid::kStreamBase + r.stream, "stream " + std::to_string(r.stream));
    }
    devices.insert(r.device);
    const double start_us = static_cast<double>(static_cast<int64_t>(r.start_ns) - g_offset_ns) / 1000.0;
    const double dur_us = static_cast<double>(r.end_ns - r.start_ns) / 1000.0;
    nlohmann::json args = {
        {"device", r.device}, {"context", r.context}, {"stream", r.stream}, {"correlation", r.correlation}};
    const char* cat = trace_cat::kKernel;
    if (r.kind == GpuKind::kernel) {
      args["grid"] = {r.grid[0], r.grid[1], r.grid[2]};
      args["block"] = {r.block[0], r.block[1], r.block[2]};
      args["registers per thread"] = r.registers_per_thread;
      args["shared memory"] = r.shared_memory_bytes;
    } else {
      cat = r.kind == GpuKind::memcpy ? trace_cat::kGpuMemcpy : trace_cat::kGpuMemset;
      args["bytes"] = r.bytes;
      if (dur_us > 0) args["memory bandwidth (GB/s)"] = static_cast<double>(r.bytes) / (dur_us * 1e3);
    }
    trace.span(r.name, cat, trace_tid::kStreamBase + r.stream, start_us, dur_us, std::move(args));
  }
  nlohmann::json props = nlohmann::json::array();
  for (uint32_t d : devices) props.push_back(device_properties(static_cast<int>(d)));
  if (!props.empty()) trace.set_device_properties(std::move(props));
#else
  (void)trace;
#endif
}

}  // namespace dtlab
