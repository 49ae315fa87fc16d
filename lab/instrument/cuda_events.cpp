// cuda_events.cpp: pooled CUDA events on the current stream (see cuda_events.hpp). Without CUDA, create_if_device()
// returns nullptr and nothing else is ever called.
#include "lab/instrument/cuda_events.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#ifdef DTLAB_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace dtlab {

#ifdef DTLAB_WITH_CUDA
struct CudaEventTimeline::Pool {
  std::vector<cudaEvent_t> events;
  size_t used = 0;
};

namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("cuda events: ") + what + ": " + cudaGetErrorString(err));
}
}  // namespace

std::unique_ptr<CudaEventTimeline> CudaEventTimeline::create_if_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return nullptr;
  }
  return std::unique_ptr<CudaEventTimeline>(new CudaEventTimeline());
}

CudaEventTimeline::CudaEventTimeline() : pool_(std::make_unique<Pool>()) {}

CudaEventTimeline::~CudaEventTimeline() {
  for (cudaEvent_t e : pool_->events) cudaEventDestroy(e);
}

int CudaEventTimeline::record() {
  if (pool_->used == pool_->events.size()) {
    cudaEvent_t e;
    check(cudaEventCreate(&e), "cudaEventCreate");
    pool_->events.push_back(e);
  }
  const size_t index = pool_->used++;
  check(cudaEventRecord(pool_->events[index], c10::cuda::getCurrentCUDAStream().stream()), "cudaEventRecord");
  return static_cast<int>(index);
}

double CudaEventTimeline::elapsed_ms(int from, int to) {
  check(cudaEventSynchronize(pool_->events[static_cast<size_t>(to)]), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, pool_->events[static_cast<size_t>(from)], pool_->events[static_cast<size_t>(to)]),
        "cudaEventElapsedTime");
  return ms;
}

void CudaEventTimeline::reset() { pool_->used = 0; }
#else
struct CudaEventTimeline::Pool {};
std::unique_ptr<CudaEventTimeline> CudaEventTimeline::create_if_device() { return nullptr; }
CudaEventTimeline::CudaEventTimeline() = default;
CudaEventTimeline::~CudaEventTimeline() = default;
int CudaEventTimeline::record() { return 0; }
double CudaEventTimeline::elapsed_ms(int, int) { return 0; }
void CudaEventTimeline::reset() {}
#endif

}  // namespace dtlab
