// memory.hpp: how much memory a rank uses — tensor bytes counted by a wrapping CPU allocator, the
// process's resident set from /proc, CUDA caching-allocator statistics (cuda configuration only), and
// the per-rank "memory" object of result.json built from them and the strategy's StateBytes.
//
//   install_counting_allocator();        // once, before the model is built (idempotent)
//   ... build, wrap ...  reset_peak_cpu_tensor_memory();  ... train ...
//   nlohmann::json m = memory_report(strategy.state_bytes(), world.rank());
//
// The counting allocator wraps c10's default CPU allocator: every CPU tensor storage allocated after
// installation is counted (requested bytes; the allocator's own 64-byte header and malloc's overhead are
// not). Storages allocated before installation are never counted, neither when made nor when freed.
// Counters are process-wide atomics: Gloo's worker threads allocate too.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lab/state_bytes.hpp"

namespace dtlab {

// Installs the counting allocator as c10's CPU allocator (priority 1, above the default's 0). Thread-safe
// and idempotent: later calls do nothing. Throws std::runtime_error if the wrapped default allocator
// does not offer the raw interface (context == data pointer) this wrapper relies on.
void install_counting_allocator();
bool counting_allocator_installed();

struct MemoryCounters {
  int64_t current_bytes = 0;  // CPU tensor bytes alive now (allocated after installation)
  int64_t peak_bytes = 0;     // the largest current_bytes since installation or the last reset
};
// Zeros until install_counting_allocator() ran.
MemoryCounters cpu_tensor_memory();
// Peak := current, for the total and every category (e.g. after setup, so the peak measures training steps only).
void reset_peak_cpu_tensor_memory();

// What a tensor's bytes are for. Every allocation is counted under the category of the innermost MemoryScope alive
// on the allocating thread (`other` when there is none), and uncounted from the same category when freed, so the
// counters measure what each category really holds, independently of what a strategy says it holds.
//   params      parameters the rank keeps (masters, compute copies that persist)
//   grads       gradients kept between backward and the optimizer step
//   optimizer   optimizer state (moments, momentum)
//   buffers     a strategy's transient working memory: gathered units, buckets' wire copies, reduce outputs
//   comm        scratch of the lab's own collectives (ring partial sums, receive buffers)
//   activations what forward saves for backward, and backward's temporaries
//   other       anything allocated outside a scope
enum class MemoryCategory : uint8_t { params, grads, optimizer, buffers, comm, activations, other };
inline constexpr int kMemoryCategoryCount = 7;
const char* to_string(MemoryCategory category);

// Sets the calling thread's category for the scope's lifetime (nested scopes restore the outer one).
class MemoryScope {
 public:
  explicit MemoryScope(MemoryCategory category);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryCategory previous_;
};

// Current and peak bytes of one category (zeros until the counting allocator is installed).
MemoryCounters cpu_tensor_memory(MemoryCategory category);

// Counts the calling thread's allocations as host memory for the scope's lifetime (when `host`; nested scopes
// restore the outer setting): parallel.offload's master shards, their gradients and the optimizer state, which a GPU
// run keeps in pinned host buffers. They are counted in their category as before, and also apart: they are not
// device-side bytes, and memory.limit (which stands for a GPU's memory) does not cap them.
class HostMemoryScope {
 public:
  explicit HostMemoryScope(bool host = true);
  ~HostMemoryScope();
  HostMemoryScope(const HostMemoryScope&) = delete;
  HostMemoryScope& operator=(const HostMemoryScope&) = delete;

 private:
  bool previous_;
};
// Bytes counted inside HostMemoryScopes, in all and by category; and the rest (all counted bytes but those): what a
// GPU would hold, and what memory.limit caps. Its peak is its own (not the total's peak minus the host bytes).
MemoryCounters host_tensor_memory();
MemoryCounters host_tensor_memory(MemoryCategory category);
MemoryCounters device_side_tensor_memory();

// The cap of memory.limit, enforced the way a GPU's memory bounds the CUDA caching allocator: an allocation that
// would take the device-side bytes (all counted bytes but the host's, see HostMemoryScope) past `bytes` is refused with
// c10::OutOfMemoryError (what the CUDA allocator throws) and recorded. 0 = no cap (the default). Takes effect for the
// allocations after the call, and forgets an earlier refusal.
void set_cpu_tensor_memory_limit(int64_t bytes);
int64_t cpu_tensor_memory_limit();

// Lifts the cap for its lifetime: for the lab's own measurements inside a run (the GEMM probe of the MFU peak),
// which a GPU run would make before or beside training, not with its memory. Not for training work.
class UncappedScope {
 public:
  UncappedScope();
  ~UncappedScope();
  UncappedScope(const UncappedScope&) = delete;
  UncappedScope& operator=(const UncappedScope&) = delete;

 private:
  int64_t limit_;
};

struct RefusedAllocation {
  MemoryCategory category = MemoryCategory::other;  // the scope of the thread that asked
  int64_t requested_bytes = 0;
  int64_t in_use_bytes = 0;  // device-side bytes alive when it asked
  int64_t limit_bytes = 0;
  std::array<int64_t, kMemoryCategoryCount> in_use_by_category{};
};
// The first allocation the cap refused in this process, whichever thread asked (a refusal on a communication
// thread reaches the trainer as that collective's error: this says it was out of memory). nullopt: none.
std::optional<RefusedAllocation> refused_allocation();
// "tried to allocate 12.0 MiB for activations with 250.3 MiB of the 256.0 MiB cap in use (params 98.0 MiB, ...)"
std::string describe(const RefusedAllocation& refused);
nlohmann::json to_json(const RefusedAllocation& refused);

struct ProcessMemory {
  int64_t rss_bytes = 0;  // /proc/self/status VmRSS
  int64_t hwm_bytes = 0;  // VmHWM: the peak resident set of the process's lifetime
};
// Zeros where /proc/self/status cannot be read (not Linux).
ProcessMemory process_memory();

struct CudaMemory {
  int device = 0;
  int64_t allocated_bytes = 0, allocated_peak_bytes = 0;  // bytes in live tensors
  int64_t reserved_bytes = 0, reserved_peak_bytes = 0;    // bytes the caching allocator holds from the driver
};
// The current device's caching-allocator statistics (StatType::AGGREGATE). nullopt in the cpu
// configuration, when no CUDA device is visible, and in a process that never allocated device memory.
std::optional<CudaMemory> cuda_memory();

// The "memory" object of result.json for this rank:
//   rank, params_bytes, grads_bytes, optimizer_bytes, buffers_bytes   the strategy's StateBytes
//   tensor_peak_bytes, tensor_current_bytes                            counting allocator (only when installed)
//   activations_bytes   ESTIMATE: tensor_peak_bytes - (params + grads + optimizer + buffers), floored at 0.
//                       It is everything else alive at the peak (activations, autograd temporaries,
//                       communication scratch), and it is low when `buffers` counts peak gathers that
//                       were not alive at the same moment. Only when the allocator is installed.
//   measured {<category>: {current_bytes, peak_bytes}}                 the allocator's counts per MemoryCategory
//   host_bytes                                     the strategy's StateBytes::host (parallel.offload's host buffers)
//   device_side_peak_bytes, device_side_current_bytes   the counted bytes outside host buffers (what memory.limit caps)
//   host_measured {<category>: {current_bytes, peak_bytes}}   bytes counted as host memory, when there were any
//   limit_bytes                                                       memory.limit's cap, when one is set
//   rss_bytes, hwm_bytes                                              /proc/self/status
//   cuda {device, allocated_bytes, allocated_peak_bytes, reserved_bytes, reserved_peak_bytes}  when available
//        cuda.measured {<category>: {current_bytes, peak_bytes}}  device tensors by MemoryCategory, when counted
//                                                                 (lab/device_memory.hpp: a GPU run)
nlohmann::json memory_report(const StateBytes& state, int rank);

}  // namespace dtlab
