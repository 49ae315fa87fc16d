// state_bytes.hpp: the bytes a strategy keeps on a rank between steps, by category (torch-free). The strategy
// reports them (lab/train/strategy.hpp state_bytes), the memory report sets them beside what the allocator measured
// (lab/memory.hpp).
#pragma once

#include <cstdint>

namespace dtlab {

// Per-rank bytes held by a strategy, by category (exact tensor bytes, padding included).
struct StateBytes {
  int64_t params = 0;     // parameters this rank keeps (full or shard), compute copies included
  int64_t grads = 0;      // gradient buffers
  int64_t optimizer = 0;  // optimizer state (moments, momentum, master weights)
  int64_t buffers = 0;    // communication buffers, gathered units, buckets
  // Of the above, the bytes kept in host buffers between steps (parallel.offload: master shards, their fp32
  // gradients, the optimizer state); a GPU holds the rest. 0 without offload.
  int64_t host = 0;
};

}  // namespace dtlab
