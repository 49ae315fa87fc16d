// memory.cpp: the counting CPU allocator, /proc/self/status, CUDA allocator statistics and the
// result.json "memory" object (see memory.hpp).
//
// Allocation layout: the wrapped allocator is asked for kHeaderBytes + n bytes; the first 8 bytes of the
// header hold n and the tensor gets base + kHeaderBytes. The DataPtr's context is that same pointer and
// its deleter (counting_delete) reads n back, uncounts it and hands `base` to the wrapped allocator's
// raw deleter. Keeping context == data (instead of a separate heap context) matters: some ATen users
// (oneDNN's engine allocator) call raw_allocate()/raw_deallocate() on the CPU allocator, which require
// exactly that. kHeaderBytes = 64 keeps the tensor pointer as aligned as c10's own (gAlignment <= 64).
#include "lab/memory.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/util/Exception.h>

#include "lab/device_memory.hpp"

#ifdef DTLAB_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace dtlab {
namespace {

constexpr size_t kHeaderBytes = 64;
static_assert(kHeaderBytes >= c10::gAlignment && kHeaderBytes % c10::gAlignment == 0);

std::atomic<int64_t> g_current_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};
std::atomic<int64_t> g_category_current[kMemoryCategoryCount];
std::atomic<int64_t> g_category_peak[kMemoryCategoryCount];
std::atomic<int64_t> g_host_current{0};  // HostMemoryScope's bytes
std::atomic<int64_t> g_host_peak{0};
std::atomic<int64_t> g_host_category_current[kMemoryCategoryCount];
std::atomic<int64_t> g_host_category_peak[kMemoryCategoryCount];
std::atomic<int64_t> g_device_side_current{0};  // everything else: what memory.limit caps
std::atomic<int64_t> g_device_side_peak{0};
std::atomic<bool> g_installed{false};
std::atomic<int64_t> g_limit_bytes{0};  // 0 = no cap
std::mutex g_refused_mutex;
std::optional<RefusedAllocation> g_refused;  // the first refusal (guarded by g_refused_mutex)
thread_local MemoryCategory t_category = MemoryCategory::other;
thread_local bool t_host = false;
// Set once before installation, read-only afterwards.
c10::Allocator* g_inner = nullptr;
c10::DeleterFnPtr g_inner_deleter = nullptr;

void raise_peak(std::atomic<int64_t>& peak_counter, int64_t now) {
  int64_t peak = peak_counter.load(std::memory_order_relaxed);
  while (now > peak && !peak_counter.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// Counts n bytes for `category` (as host memory when `host`), or refuses device-side bytes that would pass the cap:
// uncounts, records the first refusal and throws c10::OutOfMemoryError. Two allocations racing at the cap may both be
// refused, as on a GPU.
void count_allocation(int64_t n, MemoryCategory category, bool host) {
  const auto c = static_cast<size_t>(category);
  if (host) {
    raise_peak(g_host_peak, g_host_current.fetch_add(n, std::memory_order_relaxed) + n);
    raise_peak(g_host_category_peak[c], g_host_category_current[c].fetch_add(n, std::memory_order_relaxed) + n);
  } else {
    const int64_t now = g_device_side_current.fetch_add(n, std::memory_order_relaxed) + n;
    const int64_t limit = g_limit_bytes.load(std::memory_order_relaxed);
    if (limit > 0 && now > limit) {
      g_device_side_current.fetch_sub(n, std::memory_order_relaxed);
      RefusedAllocation refused{category, n, now - n, limit, {}};
      for (int k = 0; k < kMemoryCategoryCount; ++k)
        refused.in_use_by_category[static_cast<size_t>(k)] = g_category_current[k].load(std::memory_order_relaxed) -
                                                             g_host_category_current[k].load(std::memory_order_relaxed);
      {
        const std::lock_guard<std::mutex> lock(g_refused_mutex);
        if (!g_refused) g_refused = refused;
      }
      TORCH_CHECK_WITH(OutOfMemoryError, false, "out of memory under memory.limit: ", describe(refused));
    }
    raise_peak(g_device_side_peak, now);
  }
  raise_peak(g_peak_bytes, g_current_bytes.fetch_add(n, std::memory_order_relaxed) + n);
  raise_peak(g_category_peak[c], g_category_current[c].fetch_add(n, std::memory_order_relaxed) + n);
}

void uncount(int64_t n, MemoryCategory category, bool host) {
  const auto c = static_cast<size_t>(category);
  g_current_bytes.fetch_sub(n, std::memory_order_relaxed);
  g_category_current[c].fetch_sub(n, std::memory_order_relaxed);
  if (host) {
    g_host_current.fetch_sub(n, std::memory_order_relaxed);
    g_host_category_current[c].fetch_sub(n, std::memory_order_relaxed);
  } else {
    g_device_side_current.fetch_sub(n, std::memory_order_relaxed);
  }
}

// Header layout: bytes 0-7 the size n, byte 8 the category it was counted under, byte 9 whether as host memory.
void counting_delete(void* data) {
  if (data == nullptr) return;  // zero-byte allocations
  char* base = static_cast<char*>(data) - kHeaderBytes;
  int64_t n = 0;
  std::memcpy(&n, base, sizeof n);
  uncount(n, static_cast<MemoryCategory>(static_cast<uint8_t>(base[sizeof n])), base[sizeof n + 1] != 0);
  g_inner_deleter(base);
}

struct CountingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    // Zero bytes: no memory, but the same deleter, as raw_deleter() promises.
    if (n == 0) return c10::DataPtr(nullptr, nullptr, &counting_delete, cpu);
    if (n > std::numeric_limits<size_t>::max() - kHeaderBytes ||
        n > static_cast<size_t>(std::numeric_limits<int64_t>::max()))
      throw std::bad_alloc();
    const auto bytes = static_cast<int64_t>(n);
    const MemoryCategory category = t_category;
    const bool host = t_host;
    count_allocation(bytes, category, host);  // first: a refusal past the cap allocates nothing
    c10::DataPtr inner;
    try {
      inner = g_inner->allocate(n + kHeaderBytes);
    } catch (...) {
      uncount(bytes, category, host);
      throw;
    }
    void* base = inner.release_context();  // context == data for the default allocator (checked at install)
    std::memcpy(base, &bytes, sizeof bytes);
    static_cast<char*>(base)[sizeof bytes] = static_cast<char>(category);
    static_cast<char*>(base)[sizeof bytes + 1] = static_cast<char>(host ? 1 : 0);
    void* data = static_cast<char*>(base) + kHeaderBytes;
    return c10::DataPtr(data, data, &counting_delete, cpu);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

int64_t status_kib(const std::string& text, const char* key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + std::strlen(key)));  // "VmRSS:\t  12345 kB": stoll skips blanks
}

}  // namespace

void install_counting_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* inner = c10::GetDefaultCPUAllocator();
    c10::DeleterFnPtr deleter = inner->raw_deleter();
    {
      c10::DataPtr probe = inner->allocate(kHeaderBytes);
      if (deleter == nullptr || probe.get() != probe.get_context() || probe.get_deleter() != deleter)
        throw std::runtime_error(
            "install_counting_allocator: c10's default CPU allocator does not return "
            "context == data with its raw deleter; the counting wrapper cannot free through it");
    }
    g_inner = inner;
    g_inner_deleter = deleter;
    // Owned by c10 from now on (SetCPUAllocator keeps the raw pointer for the process's lifetime).
    static CountingAllocator* counting = new CountingAllocator();
    c10::SetCPUAllocator(counting, /*priority=*/1);
    g_installed.store(true);
  });
}

bool counting_allocator_installed() { return g_installed.load(); }

MemoryCounters cpu_tensor_memory() {
  return {g_current_bytes.load(std::memory_order_relaxed), g_peak_bytes.load(std::memory_order_relaxed)};
}

void reset_peak_cpu_tensor_memory() {
  // A concurrent allocation may raise the peak again between the two operations; that is its purpose.
  const auto relaxed = std::memory_order_relaxed;
  g_peak_bytes.store(g_current_bytes.load(relaxed), relaxed);
  g_host_peak.store(g_host_current.load(relaxed), relaxed);
  g_device_side_peak.store(g_device_side_current.load(relaxed), relaxed);
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    g_category_peak[c].store(g_category_current[c].load(relaxed), relaxed);
    g_host_category_peak[c].store(g_host_category_current[c].load(relaxed), relaxed);
  }
}

const char* to_string(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::params:
      return "params";
    case MemoryCategory::grads:
      return "grads";
    case MemoryCategory::optimizer:
      return "optimizer";
    case MemoryCategory::buffers:
      return "buffers";
    case MemoryCategory::comm:
      return "comm";
    case MemoryCategory::activations:
      return "activations";
    case MemoryCategory::other:
      return "other";
  }
  return "other";
}

MemoryScope::MemoryScope(MemoryCategory category) : previous_(t_category) { t_category = category; }
MemoryScope::~MemoryScope() { t_category = previous_; }

HostMemoryScope::HostMemoryScope(bool host) : previous_(t_host) { t_host = host; }
HostMemoryScope::~HostMemoryScope() { t_host = previous_; }

MemoryCounters host_tensor_memory() {
  return {g_host_current.load(std::memory_order_relaxed), g_host_peak.load(std::memory_order_relaxed)};
}
MemoryCounters host_tensor_memory(MemoryCategory category) {
  const auto c = static_cast<size_t>(category);
  return {g_host_category_current[c].load(std::memory_order_relaxed),
          g_host_category_peak[c].load(std::memory_order_relaxed)};
}
MemoryCounters device_side_tensor_memory() {
  return {g_device_side_current.load(std::memory_order_relaxed), g_device_side_peak.load(std::memory_order_relaxed)};
}

void set_cpu_tensor_memory_limit(int64_t bytes) {
  const std::lock_guard<std::mutex> lock(g_refused_mutex);
  g_refused.reset();
  g_limit_bytes.store(std::max<int64_t>(0, bytes));
}
int64_t cpu_tensor_memory_limit() { return g_limit_bytes.load(); }

UncappedScope::UncappedScope() : limit_(g_limit_bytes.exchange(0)) {}
UncappedScope::~UncappedScope() { g_limit_bytes.store(limit_); }

std::optional<RefusedAllocation> refused_allocation() {
  const std::lock_guard<std::mutex> lock(g_refused_mutex);
  return g_refused;
}

std::string describe(const RefusedAllocation& refused) {
  std::string text = "tried to allocate " + mib(refused.requested_bytes) + " for " + to_string(refused.category) +
                     " with " + mib(refused.in_use_bytes) + " of the " + mib(refused.limit_bytes) + " cap in use (";
  bool first = true;
  for (int k = 0; k < kMemoryCategoryCount; ++k) {
    const int64_t bytes = refused.in_use_by_category[static_cast<size_t>(k)];
    if (bytes == 0) continue;
    text += std::string(first ? "" : ", ") + to_string(static_cast<MemoryCategory>(k)) + " " + mib(bytes);
    first = false;
  }
  return text + ")";
}

nlohmann::json to_json(const RefusedAllocation& refused) {
  nlohmann::json in_use = nlohmann::json::object();
  for (int k = 0; k < kMemoryCategoryCount; ++k)
    in_use[to_string(static_cast<MemoryCategory>(k))] = refused.in_use_by_category[static_cast<size_t>(k)];
  return {{"category", to_string(refused.category)},
          {"requested_bytes", refused.requested_bytes},
          {"in_use_bytes", refused.in_use_bytes},
          {"limit_bytes", refused.limit_bytes},
          {"in_use_by_category", in_use}};
}

MemoryCounters cpu_tensor_memory(MemoryCategory category) {
  const auto c = static_cast<size_t>(category);
  return {g_category_current[c].load(std::memory_order_relaxed), g_category_peak[c].load(std::memory_order_relaxed)};
}

ProcessMemory process_memory() {
  std::ifstream in("/proc/self/status");
  if (!in) return {};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {status_kib(text, "VmRSS:") * 1024, status_kib(text, "VmHWM:") * 1024};
}

namespace {

// Device allocations alive, by address, with the category and bytes they were counted under (device_memory.hpp).
struct DeviceCounts {
  std::mutex mutex;
  std::unordered_map<size_t, std::pair<MemoryCategory, int64_t>> live;
  std::array<int64_t, kMemoryCategoryCount> current{}, peak{};
};
DeviceCounts& device_counts() {
  static auto* counts = new DeviceCounts;  // never destroyed: the allocator may still free memory at exit
  return *counts;
}
std::atomic<bool> g_device_counting{false};

#ifdef DTLAB_WITH_CUDA
// Called by the caching allocator with its per-device lock held, on the thread that allocates or frees; takes only
// this file's lock, which no reader holds while calling into the allocator.
void on_device_trace(const c10::CachingDeviceAllocator::TraceEntry& entry) {
  using Action = c10::CachingDeviceAllocator::TraceEntry::Action;
  if (entry.action_ != Action::ALLOC && entry.action_ != Action::FREE_REQUESTED) return;
  DeviceCounts& d = device_counts();
  const std::lock_guard<std::mutex> lock(d.mutex);
  if (entry.action_ == Action::ALLOC) {
    const auto c = static_cast<size_t>(t_category);
    d.live[entry.addr_] = {t_category, static_cast<int64_t>(entry.size_)};
    d.current[c] += static_cast<int64_t>(entry.size_);
    d.peak[c] = std::max(d.peak[c], d.current[c]);
    return;
  }
  const auto it = d.live.find(entry.addr_);
  if (it == d.live.end()) return;  // allocated before counting began
  d.current[static_cast<size_t>(it->second.first)] -= it->second.second;
  d.live.erase(it);
}
#endif

}  // namespace

void install_device_category_counts() {
#ifdef DTLAB_WITH_CUDA
  bool expected = false;
  if (!g_device_counting.compare_exchange_strong(expected, true)) return;
  c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(on_device_trace);
#endif
}

bool device_category_counts_installed() { return g_device_counting.load(); }

MemoryCounters device_tensor_memory(MemoryCategory category) {
  DeviceCounts& d = device_counts();
  const std::lock_guard<std::mutex> lock(d.mutex);
  const auto c = static_cast<size_t>(category);
  return {d.current[c], d.peak[c]};
}

void reset_peak_device_tensor_memory() {
  DeviceCounts& d = device_counts();
  const std::lock_guard<std::mutex> lock(d.mutex);
  d.peak = d.current;
}

std::optional<CudaMemory> cuda_memory() {
#ifdef DTLAB_WITH_CUDA
  // A process that never allocated on a device (a CPU run on a GPU machine) has no caching allocator to ask: its
  // getDeviceStats would throw "Invalid device argument".
  if (c10::cuda::device_count() == 0 || !c10::cuda::CUDACachingAllocator::get()->initialized()) return std::nullopt;
  const c10::DeviceIndex device = c10::cuda::current_device();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  CudaMemory m;
  m.device = device;
  m.allocated_bytes = stats.allocated_bytes[aggregate].current;
  m.allocated_peak_bytes = stats.allocated_bytes[aggregate].peak;
  m.reserved_bytes = stats.reserved_bytes[aggregate].current;
  m.reserved_peak_bytes = stats.reserved_bytes[aggregate].peak;
  return m;
#else
  return std::nullopt;
#endif
}

namespace {

// {<category>: {current_bytes, peak_bytes}} of one set of counters (MemoryCategory -> MemoryCounters), in category
// order.
template <typename Counters>
nlohmann::json by_category(Counters counters) {
  nlohmann::json out = nlohmann::json::object();
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    const MemoryCounters m = counters(category);
    out[to_string(category)] = {{"current_bytes", m.current_bytes}, {"peak_bytes", m.peak_bytes}};
  }
  return out;
}

}  // namespace

nlohmann::json memory_report(const StateBytes& state, int rank) {
  nlohmann::json j = {{"rank", rank},
                      {"params_bytes", state.params},
                      {"grads_bytes", state.grads},
                      {"optimizer_bytes", state.optimizer},
                      {"buffers_bytes", state.buffers}};
  if (counting_allocator_installed()) {
    const MemoryCounters tensors = cpu_tensor_memory();
    const int64_t held = state.params + state.grads + state.optimizer + state.buffers;
    j["tensor_peak_bytes"] = tensors.peak_bytes;
    j["tensor_current_bytes"] = tensors.current_bytes;
    j["activations_bytes"] = std::max<int64_t>(0, tensors.peak_bytes - held);  // an estimate, see memory.hpp
    j["measured"] = by_category([](MemoryCategory c) { return cpu_tensor_memory(c); });
    j["host_bytes"] = state.host;
    const MemoryCounters device_side = device_side_tensor_memory();
    j["device_side_peak_bytes"] = device_side.peak_bytes;
    j["device_side_current_bytes"] = device_side.current_bytes;
    if (host_tensor_memory().peak_bytes > 0)
      j["host_measured"] = by_category([](MemoryCategory c) { return host_tensor_memory(c); });
    if (const int64_t limit = cpu_tensor_memory_limit(); limit > 0) j["limit_bytes"] = limit;
  }
  const ProcessMemory process = process_memory();
  j["rss_bytes"] = process.rss_bytes;
  j["hwm_bytes"] = process.hwm_bytes;
  if (const auto cuda = cuda_memory()) {
    j["cuda"] = {{"device", cuda->device},
                 {"allocated_bytes", cuda->allocated_bytes},
                 {"allocated_peak_bytes", cuda->allocated_peak_bytes},
                 {"reserved_bytes", cuda->reserved_bytes},
                 {"reserved_peak_bytes", cuda->reserved_peak_bytes}};
    if (device_category_counts_installed())
      j["cuda"]["measured"] = by_category([](MemoryCategory c) { return device_tensor_memory(c); });
  }
  return j;
}

}  // namespace dtlab
