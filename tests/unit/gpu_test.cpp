// gpu_test.cpp: the GPU probe never crashes and says plainly when no CUDA device is there.
#include <gtest/gtest.h>

#include "lab/instrument/gpu.hpp"

namespace dtlab {
namespace {

TEST(GpuStatus, ReportsWhatThisBuildAndMachineHave) {
  const GpuStatus status = gpu_status();
  EXPECT_FALSE(status.summary.empty());
  if (!status.built_with_cuda) {
    EXPECT_EQ(status.summary, "cpu build (no CUDA)");
  } else if (status.device_count == 0) {
    EXPECT_NE(status.summary.find("unavailable: no CUDA device"), std::string::npos) << status.summary;
  } else {  // a device: the summary says how many and names it (what result.json's context records)
    EXPECT_NE(status.summary.find(std::to_string(status.device_count)), std::string::npos) << status.summary;
    EXPECT_NE(status.summary.find("NVIDIA"), std::string::npos) << status.summary;
  }
  NvtxRange range("forward-compute");  // a no-op or an NVTX push/pop; never throws
}

}  // namespace
}  // namespace dtlab
