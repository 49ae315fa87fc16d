// device.cpp: train.device and the device operations of a run (see device.hpp). The only file of the trainer that
// includes CUDA headers (cuda configuration).
#include "lab/device.hpp"

#include <stdexcept>

#include <ATen/SDPBackend.h>

#include "kernels/stochastic_round.hpp"
#include "lab/device_memory.hpp"

#ifdef DTLAB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace dtlab {

int cuda_device_count() {
#ifdef DTLAB_WITH_CUDA
  return static_cast<int>(c10::cuda::device_count());  // 0 without a driver or device, never a throw
#else
  return 0;
#endif
}

std::string cuda_device_name(int index) {
#ifdef DTLAB_WITH_CUDA
  if (index < 0 || index >= cuda_device_count()) return "";
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->name;
#else
  (void)index;
  return "";
#endif
}

TrainDevice resolve_train_device(const std::string& setting, int local_rank) {
  if (setting != "auto" && setting != "cpu" && setting != "cuda")
    throw std::invalid_argument("train.device='" + setting + "' is not one of auto | cpu | cuda");
  const int devices = cuda_device_count();
  if (setting == "cpu" || (setting == "auto" && devices == 0)) return {};
#ifndef DTLAB_WITH_CUDA
  throw std::invalid_argument(
      "train.device=cuda needs the cuda configuration (make build-cuda) and a GPU; this is a cpu build: use "
      "train.device=cpu or auto");
#else
  if (devices == 0)
    throw std::invalid_argument(
        "train.device=cuda: this cuda build sees no CUDA device (no driver, or CUDA_VISIBLE_DEVICES hides them); "
        "use train.device=cpu or auto");
  const int index = std::max(0, local_rank) % devices;
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
  TrainDevice device;
  device.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
  device.name = "cuda:" + std::to_string(index) + " (" + cuda_device_name(index) + ")";
  return device;
#endif
}

at::Tensor to_device(const at::Tensor& host, const TrainDevice& device) {
  if (!device.cuda()) return host;
  return host.pin_memory().to(device.device, /*non_blocking=*/true);
}

void synchronize(const TrainDevice& device) {
#ifdef DTLAB_WITH_CUDA
  if (device.cuda()) c10::cuda::getCurrentCUDAStream(device.device.index()).synchronize();
#else
  (void)device;
#endif
}

void* current_cuda_stream(const at::Device& device) {
#ifdef DTLAB_WITH_CUDA
  if (device.is_cuda()) return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#endif
  (void)device;
  return nullptr;
}

#ifdef DTLAB_WITH_CUDA
struct CopyStream::State {
  c10::cuda::CUDAStream stream;
};
#else
struct CopyStream::State {};
#endif

CopyStream::CopyStream(const at::Device& device) {
#ifdef DTLAB_WITH_CUDA
  if (device.is_cuda()) state_ = std::make_shared<State>(State{c10::cuda::getStreamFromPool(false, device.index())});
#else
  (void)device;
#endif
}

void CopyStream::to_host(const at::Tensor& pinned_dst, const at::Tensor& device_src) {
#ifdef DTLAB_WITH_CUDA
  if (state_ && device_src.is_cuda()) {
    // The copy waits for the source's producers (queued on the current stream so far), not the host.
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_src.device().index()));
    ready.block(state_->stream);
    {
      const c10::cuda::CUDAStreamGuard on_copy_stream(state_->stream);
      pinned_dst.copy_(device_src, /*non_blocking=*/true);
    }
    device_src.record_stream(state_->stream);  // the allocator keeps the source until the copy stream is past it
    return;
  }
#endif
  pinned_dst.copy_(device_src);
}

void CopyStream::wait() {
#ifdef DTLAB_WITH_CUDA
  if (state_) state_->stream.synchronize();
#endif
}

void reset_peak_device_memory(const TrainDevice& device) {
#ifdef DTLAB_WITH_CUDA
  if (device.cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.device.index());
  if (device.cuda()) reset_peak_device_tensor_memory();
#else
  (void)device;
#endif
}

void stochastic_round_to_bf16(const at::Tensor& in, at::Tensor& out, uint64_t seed) {
  if (in.scalar_type() != at::kFloat || out.scalar_type() != at::kBFloat16 || !in.is_contiguous() ||
      !out.is_contiguous() || in.numel() != out.numel() || in.device() != out.device())
    throw std::invalid_argument(
        "stochastic_round_to_bf16 needs contiguous fp32 in and bf16 out of the same size on the same device");
  if (in.is_cuda()) {
#ifdef DTLAB_WITH_CUDA
    kernels::stochastic_round_to_bf16_cuda(in.data_ptr<float>(), reinterpret_cast<uint16_t*>(out.data_ptr()),
                                           static_cast<size_t>(in.numel()), seed,
                                           at::cuda::getCurrentCUDAStream(in.device().index()).stream());
    return;
#endif
  }
  kernels::stochastic_round_to_bf16_cpu(in.data_ptr<float>(), reinterpret_cast<uint16_t*>(out.data_ptr()),
                                        static_cast<size_t>(in.numel()), seed);
}

std::string attention_kernel(int64_t micro_batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                             at::ScalarType dtype, const TrainDevice& device) {
  const auto options = at::TensorOptions().dtype(dtype).device(device.device);
  const at::Tensor q = at::empty({micro_batch, heads, seq_len, head_dim}, options);
  const int64_t choice = at::_fused_sdp_choice(q, q, q, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
  switch (static_cast<at::SDPBackend>(choice)) {
    case at::SDPBackend::math:
      return "math";
    case at::SDPBackend::flash_attention:
      return "flash_attention";
    case at::SDPBackend::efficient_attention:
      return "efficient_attention";
    case at::SDPBackend::cudnn_attention:
      return "cudnn_attention";
    case at::SDPBackend::overrideable:
      return "overrideable";
    case at::SDPBackend::error:
      break;
  }
  return "unknown (" + std::to_string(choice) + ")";
}

double sum_of_squares(const std::vector<at::Tensor>& tensors) {
  double total = 0.0;
  at::Tensor on_device;  // the running double sum of device tensors
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!t.is_cuda()) {
      total += t.pow(2).sum().item<double>();
      continue;
    }
    const at::Tensor square_sum = t.pow(2).sum().to(at::kDouble);
    on_device = on_device.defined() ? on_device + square_sum : square_sum;
  }
  return on_device.defined() ? total + on_device.item<double>() : total;
}

}  // namespace dtlab
