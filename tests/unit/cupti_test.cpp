// cupti_test.cpp: without a usable GPU the CUPTI collector says why in one line, once, and training goes on.
#include <gtest/gtest.h>

#include <string>

#include "lab/instrument/cupti.hpp"
#include "lab/instrument/gpu.hpp"
#include "lab/instrument/trace.hpp"

namespace dtlab {
namespace {

TEST(CuptiCollector, UnavailableSaysWhyOnceAndAddsNothing) {
  const GpuStatus gpu = gpu_status();
  if (gpu.built_with_cuda && gpu.device_count > 0) GTEST_SKIP() << "a CUDA device is present: " << gpu.summary;

  // NOTE: the line is printed once per process; this is the only test that starts a collector.
  testing::internal::CaptureStderr();
  CuptiCollector first, second;
  const bool started = first.start();
  const bool started_again = second.start();
  const std::string err = testing::internal::GetCapturedStderr();

  EXPECT_FALSE(started);
  EXPECT_FALSE(started_again);
  const std::string expected =
      gpu.built_with_cuda ? "cupti: unavailable: no CUDA device\n" : "cupti: unavailable: not built with CUDA\n";
  EXPECT_EQ(err, expected);

  TraceWriter trace(0, 1, "none");
  first.stop_into(trace);  // a no-op after a failed start
  EXPECT_EQ(trace.event_count(), 0u);
}

}  // namespace
}  // namespace dtlab
