// gpu.hpp: what the GPU side of this build can see, and NVTX ranges.
//
// In the cpu configuration everything here is a cheap no-op that reports "not built with CUDA".
// In the cuda configuration it asks the CUDA runtime for devices (no driver -> "unavailable: no CUDA
// device", never a crash), reports the CUPTI version, and NvtxRange pushes/pops NVTX3 ranges named
// with Megatron's phase vocabulary (forward-compute, backward-compute, ...).
#pragma once

#include <string>

namespace dtlab {

struct GpuStatus {
  bool built_with_cuda = false;
  int device_count = 0;
  std::string summary;  // one line for logs and result.json
};
GpuStatus gpu_status();

// RAII NVTX range (no-op without CUDA).
class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace dtlab
