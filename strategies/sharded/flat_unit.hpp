// flat_unit.hpp: the sharded strategies' flat units and their storage. A unit (parallel.wrap) is a group of the
// model's units whose parameters are flattened into one buffer, padded to a multiple of the shard group size F and
// split into F equal shards; rank i of the shard group owns shard i: the master parameters, their gradient and (in
// sharded/optimizer.cpp) their optimizer state.
//
// The model computes with views of each unit's gathered flat buffer (`full`). Gathers write that buffer through an
// alias with its own version counter, so refilling it after a free does not look like an in-place change to
// autograd; freeing drops its storage (views stay valid and are refilled before they are read again).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "lab/comm/comm.hpp"
#include "lab/model.hpp"
#include "strategies/sharded/sharding.hpp"

namespace dtlab {

// The dtypes a sharded strategy computes, reduces and keeps masters in, and whether masters live in host buffers.
struct ShardedPrecision {
  at::ScalarType compute = at::kFloat, reduce = at::kFloat, master = at::kFloat;
  bool offload = false;
  at::Device device{at::kCPU};  // where the model computes: its parameters' device
  // The master shard needs a compute-side copy before gathers: offloaded, or in another dtype.
  bool separate_compute_copy() const { return offload || compute != master; }
  // Where master shards, their gradients and the optimizer state live: the host when offloading (pinned memory
  // when the model is on a GPU, so the copies are DMA transfers), else beside the model.
  at::TensorOptions master_side(at::ScalarType dtype) const {
    const bool host = offload || device.is_cpu();
    return at::TensorOptions()
        .dtype(dtype)
        .device(host ? at::Device(at::kCPU) : device)
        .pinned_memory(host && offload && device.is_cuda());
  }
  at::TensorOptions compute_side(at::ScalarType dtype) const { return at::TensorOptions().dtype(dtype).device(device); }
};

struct FlatUnit {
  std::string name;
  std::vector<int> model_units;  // model unit numbers: 0 embedding, 1..L blocks, L+1 head
  int chunk = 0;                 // the pipeline chunk of this rank it belongs to (0 without stages)
  std::vector<ParamRef> params;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;
  std::vector<bool> decay;
  int64_t numel = 0, padded = 0, shard_numel = 0;
  at::Tensor shard;           // this rank's fp32 master parameters [shard_numel] (host buffer when offloading)
  at::Tensor shard_grad;      // their gradient [shard_numel] (host buffer when offloading)
  at::Tensor compute_shard;   // offload: compute-side copy of `shard` that gathers read
  at::Tensor full;            // gathered parameters [padded]; the model computes with views of it
  at::Tensor full_writer;     // storage alias of `full` for collective writes
  at::Tensor full_grad;       // gradients of the gathered parameters [padded]
  at::Tensor reduce_in;       // reduce-dtype copy of full_grad when it differs from the compute dtype
  at::Tensor reduce_out;      // reduce-scatter output [shard_numel], reduce dtype
  at::Tensor master_scratch;  // master_dtype=bf16: fp32 copy of the shard the optimizer steps on
  std::vector<at::Tensor> views;
  bool params_ready = false;
  bool gather_pending = false;
  CommHandle gather;
  CommHandle grad_reduce;  // no_shard: the all-reduce of the last micro-step
  size_t grads_ready = 0;
};

// Groups the model units of `chunks` (this rank's pipeline chunks, strategies/cost_plan.hpp chunks_on_rank; every
// unit in one chunk without stages) per config.parallel.wrap, cut at the chunks' edges (lab/unit_layout.hpp),
// flattens each group into a FlatUnit sharded over a group of `shard_group_size` ranks (this rank's place in it:
// `shard_rank`) and rebinds the model's parameters to views of the unit's `full` buffer, their .grad to views of
// `full_grad`. Memory is tagged with the categories that ShardedEngine::state_bytes() counts.
std::vector<FlatUnit> build_flat_units(GPT& model, const Config& config, ShardingMode mode,
                                       const ShardedPrecision& precision, int shard_group_size, int shard_rank,
                                       const std::vector<std::vector<int>>& chunks);

int64_t numel_of(const std::vector<int64_t>& shape);

// The [begin, end) ranges of shard `shard_rank` of `unit` (offsets within the shard) that the gradient norm counts
// on this rank: everything but the parameters a model-parallel plan marks as counted by another rank
// (ParamRef::counted_in_norm: tensor parallelism's replicated norms on tp ranks > 0). One range [0, shard_numel)
// when every parameter counts (padding holds zero gradients).
std::vector<std::pair<int64_t, int64_t>> counted_shard_ranges(const FlatUnit& unit, int shard_rank);

// Storage of `t` (and every view of it) released / re-allocated in place: views stay valid objects and see the new
// bytes once they are written. ensure_storage counts what it allocates as buffers (transient working memory).
void release_storage(const at::Tensor& t);
void ensure_storage(const at::Tensor& t, int64_t nbytes);
bool has_storage(const at::Tensor& t);

}  // namespace dtlab
