// gpu_test.cpp: the GPU probe never crashes and says plainly when no CUDA device is there; the backend that `auto`
// picks.
#include <gtest/gtest.h>

#include "lab/comm/nccl_backend.hpp"
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

// parallel.backend=auto and comm-bench --backend auto share one rule: NCCL only in a cuda build, for GPU buffers, with
// a GPU per local rank and more than one rank; Gloo otherwise. (The cuda configuration's unit tests check the NCCL
// case.)
TEST(AutoBackend, NcclOnlyForGpuBuffersWithAGpuPerLocalRankAndMoreThanOneRank) {
  EXPECT_STREQ(comm::auto_backend(true, 8, 8, 16), comm::nccl_built() ? "nccl" : "gloo");
  EXPECT_STREQ(comm::auto_backend(false, 8, 8, 16), "gloo") << "host buffers";
  EXPECT_STREQ(comm::auto_backend(true, 1, 2, 2), "gloo") << "two ranks would share a GPU";
  EXPECT_STREQ(comm::auto_backend(true, 1, 1, 1), "gloo") << "one rank: nothing to communicate";
}

}  // namespace
}  // namespace dtlab
