// gpu.cpp: device discovery, CUPTI version and NVTX ranges (see gpu.hpp).
#include "lab/instrument/gpu.hpp"

#ifdef DTLAB_WITH_CUDA
#include <cuda_runtime.h>
#include <cupti.h>
#include <nvtx3/nvToolsExt.h>
#endif

namespace dtlab {

GpuStatus gpu_status() {
  GpuStatus status;
#ifdef DTLAB_WITH_CUDA
  status.built_with_cuda = true;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  uint32_t cupti_version = 0;
  const bool has_cupti = cuptiGetVersion(&cupti_version) == CUPTI_SUCCESS;
  const std::string cupti = has_cupti ? "CUPTI API " + std::to_string(cupti_version) : "CUPTI unavailable";
  if (err != cudaSuccess || count == 0) {
    status.summary = "cuda build; unavailable: no CUDA device (" + std::string(cudaGetErrorString(err)) + "); " + cupti;
  } else {
    status.device_count = count;
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    status.summary = "cuda build; " + std::to_string(count) + " device(s), first: " + prop.name + "; " + cupti;
  }
#else
  status.summary = "cpu build (no CUDA)";
#endif
  return status;
}

#ifdef DTLAB_WITH_CUDA
NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }
#else
NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() {}
#endif

}  // namespace dtlab
