// memory_model.hpp: bytes per rank by category — the ZeRO closed forms, the activations autograd keeps in our
// forward (lab/model.cpp) with the checkpointing variants, and the predicted peak of a run (torch-free).
//
//   ZeroBytes z = zero_bytes_per_rank(7.5e9, 64, ZeroStage::zero3);          // 1.875e9 bytes (ZeRO Fig. 1)
//   MemoryPrediction m = predict_memory(config, cost_plan(config, rank));    // params ... peak
//
// Peak = state (params + grads + optimizer + buffers, exact from the strategy's cost plan, padding included)
//      + what one micro-batch's forward/backward has alive at its worst moment (activations + logits).
// The worst moment is found by walking the backward: the loss backward (log-probs and two [T, V] fp32
// gradients), the final norm's backward, and every block's backward (its saved tensors, the gradient flowing
// in, and the SwiGLU backward's two [T, ffn] gradients; for a checkpointed block the recomputed tensors).
// See docs/cost-models.md for the count, term by term, and where it breaks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/config.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {

// ---- ZeRO closed forms (Rajbhandari et al. 2020, §3 and Fig. 1) ---------------------------------------------
// Mixed-precision Adam: 2 bytes of 16-bit parameters + 2 of 16-bit gradients + K = 12 of optimizer state (fp32
// master, m, v) per parameter. Per rank with N data-parallel ranks:
//   ddp 2Ψ + 2Ψ + KΨ;  zero1 2Ψ + 2Ψ + KΨ/N;  zero2 2Ψ + 2Ψ/N + KΨ/N;  zero3 (2 + 2 + K)Ψ/N
enum class ZeroStage { ddp, zero1, zero2, zero3 };
struct ZeroBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};
// REQUIRES: params >= 0, ranks >= 1.
ZeroBytes zero_bytes_per_rank(double params, int ranks, ZeroStage stage, double optimizer_bytes_per_param = 12);

// FSDP's parameter memory at its peak (FSDP paper §3.2): every unit's shard plus the largest unit gathered,
// Σψᵢ/F + max ψᵢ elements. REQUIRES: shard_factor >= 1.
double fsdp_peak_param_elements(const std::vector<int64_t>& unit_numel, int shard_factor);

// ---- activations of our forward ------------------------------------------------------------------------
// Bytes autograd saves in one transformer block for a micro-batch of T = micro_batch·seq_len tokens
// (c = bytes of precision.param_dtype; RMSNorm computes in fp32):
//   each RMSNorm  8·T·d + c·T·d + 4·T      fp32 input (the input itself when c = 4), fp32 x·rstd, output, rstd
//   attention     5·c·T·d + 4·T·H          q after RoPE, K and V expanded to H heads, SDPA output, wo input;
//                                          SDPA's fp32 log-sum-exp (the s×s matrix is never stored)
//   SwiGLU MLP    4·c·T·ffn                gate and up outputs, silu(gate), the product (w_down input)
// Under tensor parallelism (parallel.tp = t) each rank holds its heads' and its hidden slice's tensors: H, ffn and
// the attention's T·d terms divide by t, the norms do not (Korthikanti et al. 2022's 10 + 24/t shape). With sequence
// parallelism the norms hold T/t tokens and their output goes to the all-gather unsaved, and each half's column-
// parallel linears save the gathered [T, d] input instead (our layers keep it; Megatron re-gathers it in backward).
struct BlockActivationBytes {
  int64_t norm = 0, attention = 0, mlp = 0;
  int64_t block() const { return 2 * norm + attention + mlp; }
};
BlockActivationBytes block_activation_bytes(const Config& config);

// What block `index` keeps through the forward under parallel.activation_checkpointing:
// none: block(); full (index % checkpoint_every == 0): its input c·T·d; selective: its input + norm + mlp.
int64_t block_saved_bytes(const Config& config, int64_t index);

struct ActivationPeak {
  int64_t activations = 0;  // block tensors, final norm, gradients in flight, the batch's tokens, RoPE tables
  int64_t logits = 0;       // log-probs [T, V] fp32 and the loss gradients alive at the peak (0 if freed)
  int64_t forward_end = 0;  // everything saved when the forward ends (for reference)
  std::string phase;        // where the peak is: "loss backward" | "final norm backward" | "block <i> backward"
  // Per block k, the largest moment of its backward (activations only; the log-probs are freed by then) and where:
  // a later unit's gradient reduce-scatter can be in flight there, not before (the first unit to finish is the head's).
  struct Moment {
    int64_t activations = 0;
    std::string phase;
  };
  std::vector<Moment> block_backward;
};
// `sharded`: strategies that hook every unit's output (StrategySpec::hooks_unit_outputs: the sharded engine's)
// keep one more [T, d] gradient alive through the backward (measured: exactly c·T·d more than single / ddp).
ActivationPeak activation_peak(const Config& config, bool sharded = false);

// ---- per-rank prediction ----------------------------------------------------------------------------------
struct MemoryPrediction {
  int64_t params = 0, grads = 0, optimizer = 0, buffers = 0;  // the cost plan's state (exact)
  int64_t activations = 0, logits = 0;                        // activation_peak()
  int64_t comm_staging = 0;  // Gloo's all-gather staging buffer of a prefetch in flight (no state category)
  int64_t ring_scratch = 0;  // the lab ring reduce-scatter's two chunk buffers, when they are alive at the peak
  int64_t peak = 0;          // the sum of all of the above
  int64_t host = 0;          // of the peak, the state kept in host buffers (parallel.offload; the plan's state.host)
  int64_t device_peak = 0;   // peak - host: what a GPU holds, and what memory.limit caps
  std::string peak_phase;
  std::vector<std::string> notes;
};
// `comm_backend` (gloo | nccl): Gloo's all-gather gathers into a flat staging tensor from the torch allocator
// and copies out; with fsdp_full_shard / fsdp_hybrid prefetch that buffer (the largest unit) is in flight at the
// peak. NCCL gathers in place.
// The lab's ring reduce-scatter (parallel.reduce_scatter=ring, and DDP's hierarchical all-reduce inside the node)
// runs on the communicator's ring thread beside the next unit's backward, with two chunk-sized buffers of scratch
// (2·⌈n/p⌉ elements of the wire dtype; one ring at a time). In block k's backward the largest ring of the units
// after k's can be alive (of any DDP bucket: its buckets are not mapped to blocks); the peak is the larger of the
// loss-side moment and the largest block moment plus that scratch. REQUIRES: `plan` is cost_plan(config, rank) of the
// same config.
MemoryPrediction predict_memory(const Config& config, const CostPlan& plan, const std::string& comm_backend = "gloo");

// The scratch a ring reduce-scatter of `c` allocates (lab/comm/ring.cpp): two chunks of its wire dtype,
// 2·⌈n/p⌉ elements of the n it reduces over its p ranks.
int64_t ring_reduce_scatter_scratch_bytes(const PlannedCollective& c);

// The memory of `rank`: predict_memory of its cost plan, or under pipeline stages its stage's (pipeline_stage_memory).
// REQUIRES: 0 <= rank < config.world_size; a valid config whose strategy has a cost plan.
MemoryPrediction rank_memory(const Config& config, int rank, const std::string& comm_backend = "gloo");

// The largest predicted device-side peak (MemoryPrediction::device_peak) over every distinct class of rank: what a
// memory cap per rank must hold. pp is the mesh's outermost dimension, so stage s holds a run of world / pp ranks;
// inside it the ranks differ only in which shard is padded (the last), so the first and the last rank of each stage
// stand for all of them. REQUIRES: a valid config whose strategy has a cost plan.
MemoryPrediction largest_rank_peak_memory(const Config& config, const std::string& comm_backend = "gloo");

}  // namespace dtlab::analysis
