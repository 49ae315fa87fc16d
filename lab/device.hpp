// device.hpp: where a run trains — train.device resolved to a device — and the few device operations the trainer,
// the fused ops, the profiler's peak, the tools and the strategies need, so that none of them includes a CUDA header.
//
//   const TrainDevice device = resolve_train_device(config.train.device, world.local_rank());
//   model.to(device.device);                     // parameters and tables on the device
//   at::Tensor tokens = to_device(batch.tokens, device);   // pinned host copy, then a non-blocking copy
//   synchronize(device);                         // the host waits for the device's queued work (end of a step)
//
// cpu: everything stays on the host (the default on a machine without a GPU). cuda: the device is
// cuda:(local_rank % device count), so ranks on one node spread over its GPUs and, with fewer GPUs than ranks,
// share them (the Gloo backend then carries their collectives: NCCL needs one GPU per rank). auto: cuda when this is
// a cuda build that sees a device, else cpu.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace dtlab {

struct TrainDevice {
  at::Device device{at::kCPU};
  std::string name = "cpu";  // "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)": result.json context.device
  bool cuda() const { return device.is_cuda(); }
};

// CUDA devices this process can use: 0 in the cpu configuration or without a driver or device.
int cuda_device_count();
// The name CUDA reports for device `index` ("NVIDIA H100 80GB HBM3"); "" when there is none.
std::string cuda_device_name(int index);

// train.device -> the device, made current for this thread. Throws std::invalid_argument naming train.device and
// the rule when cuda is asked for in a cpu build or without a device, or the setting is unknown.
TrainDevice resolve_train_device(const std::string& setting, int local_rank);

// A copy of a host tensor on the device: through pinned memory and non_blocking on the device (ordered on the
// current stream before any kernel that reads it); the tensor itself on the cpu.
at::Tensor to_device(const at::Tensor& host, const TrainDevice& device);
// The host waits for the device's queued work; nothing on the cpu.
void synchronize(const TrainDevice& device);
// The current CUDA stream of a CUDA device as a cudaStream_t in a void* (what kernels/ launches on); nullptr for the
// host or in a cpu build.
void* current_cuda_stream(const at::Device& device);
// Copies from a GPU to pinned host memory on a stream of their own (the offloaded sharded strategies' gradient
// shards), so that the host does not stop at every copy until the compute stream's whole queue has run:
//   copies.to_host(pinned, device_tensor);   // queued after the work on the current stream so far; returns at once
//   ... the host queues more work ...
//   copies.wait();                            // the host waits for the copies alone; now `pinned` may be read
// Inactive (a plain copy in to_host) for a host device or in a cpu build.
class CopyStream {
 public:
  CopyStream() = default;
  explicit CopyStream(const at::Device& device);
  bool active() const { return state_ != nullptr; }
  void to_host(const at::Tensor& pinned_dst, const at::Tensor& device_src);
  void wait();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// The caching allocator's peaks := current (memory.hpp's cuda_memory() then reports the peak of training), and the
// per-category peaks of lab/device_memory.hpp; nothing on the cpu.
void reset_peak_device_memory(const TrainDevice& device);

// out (bf16, same device and numel) <- stochastically rounded in (fp32, contiguous): the CPU reference on host
// tensors, the CUDA kernel on the current stream for device tensors (kernels/stochastic_round.hpp).
void stochastic_round_to_bf16(const at::Tensor& in, at::Tensor& out, uint64_t seed);

// Which fused attention kernel at::scaled_dot_product_attention picks for this model's shapes (causal, [micro_batch,
// heads, seq_len, head_dim] in `dtype`) on the device: "flash_attention" | "efficient_attention" | "cudnn_attention" |
// "math" (unfused) | ...; result.json context.attention.
std::string attention_kernel(int64_t micro_batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                             at::ScalarType dtype, const TrainDevice& device);

// Σ over tensors of Σ t², each tensor's sum in its dtype, then added in order in double (a gradient norm's square).
// Host tensors: one value read per tensor. Device tensors: the doubles are added on the device and read once, so a
// model of 150 tensors costs one host sync, not 150. Undefined tensors count 0.
double sum_of_squares(const std::vector<at::Tensor>& tensors);

}  // namespace dtlab
