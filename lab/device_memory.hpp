// device_memory.hpp: a GPU's tensor memory by category. The CUDA caching allocator calls the lab on every allocation
// and free it is asked for (its allocator trace tracker); each allocation is counted under the MemoryScope category
// of the thread that asked (lab/memory.hpp), and uncounted from it when freed, as the counting allocator does for host
// tensors. result.json's memory.cuda.measured holds the counts (cuda configuration; a GPU run).
//
//   ... the process's first device allocation (the allocator attaches trackers to the devices it has set up) ...
//   install_device_category_counts();                     // once; later calls do nothing
//   MemoryCounters params = device_tensor_memory(MemoryCategory::params);
//
// Sizes are the bytes asked for, not the allocator's rounded blocks (memory.cuda.allocated_bytes counts those).
#pragma once

#include "lab/memory.hpp"

namespace dtlab {

// Starts counting. A no-op in a cpu build.
void install_device_category_counts();
bool device_category_counts_installed();
// Current and peak bytes of one category on the devices of this process (zeros until installed).
MemoryCounters device_tensor_memory(MemoryCategory category);
// Peak := current for every category (after setup, as reset_peak_cpu_tensor_memory).
void reset_peak_device_tensor_memory();

}  // namespace dtlab
