// nccl_backend.cpp: the only translation unit that includes ProcessGroupNCCL.hpp (cuda configuration).
#include "lab/comm/nccl_backend.hpp"

#include <stdexcept>

#ifdef DTLAB_WITH_CUDA
#ifndef USE_C10D_NCCL
#error "USE_C10D_NCCL must be defined in the cuda configuration (cmake/DtlabTorch.cmake)"
#endif
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace dtlab::comm {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout, int local_rank) {
#ifdef DTLAB_WITH_CUDA
  if (c10::cuda::device_count() <= local_rank)
    throw std::runtime_error(
        "parallel.backend=nccl: rank " + std::to_string(rank) + " needs cuda:" + std::to_string(local_rank) + ", but " +
        std::to_string(c10::cuda::device_count()) + " CUDA device(s) are visible (NCCL needs one GPU per rank)");
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
  backend->setBoundDeviceId(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank)));
  return backend;
#else
  (void)store, (void)rank, (void)world_size, (void)timeout, (void)local_rank;
  throw std::runtime_error(
      "parallel.backend=nccl needs the cuda configuration (cmake -DDTLAB_CUDA=ON) and GPUs; "
      "this is a cpu build: use parallel.backend=gloo");
#endif
}

bool nccl_built() {
#ifdef DTLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

const char* auto_backend(bool gpu_buffers, int gpus_visible, int local_world_size, int world_size) {
  return nccl_built() && gpu_buffers && gpus_visible >= local_world_size && world_size > 1 ? "nccl" : "gloo";
}

}  // namespace dtlab::comm
