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

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "lab/train/strategy.hpp"

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
// Peak := current (e.g. after setup, so the peak measures training steps only).
void reset_peak_cpu_tensor_memory();

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
// configuration and when no CUDA device is visible.
std::optional<CudaMemory> cuda_memory();

// The "memory" object of result.json for this rank:
//   rank, params_bytes, grads_bytes, optimizer_bytes, buffers_bytes   the strategy's StateBytes
//   tensor_peak_bytes, tensor_current_bytes                            counting allocator (only when installed)
//   activations_bytes   ESTIMATE: tensor_peak_bytes - (params + grads + optimizer + buffers), floored at 0.
//                       It is everything else alive at the peak (activations, autograd temporaries,
//                       communication scratch), and it is low when `buffers` counts peak gathers that
//                       were not alive at the same moment. Only when the allocator is installed.
//   rss_bytes, hwm_bytes                                              /proc/self/status
//   cuda {device, allocated_bytes, allocated_peak_bytes, reserved_bytes, reserved_peak_bytes}  when available
nlohmann::json memory_report(const StateBytes& state, int rank);

}  // namespace dtlab
