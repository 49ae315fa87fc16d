// memory_model.cpp: ZeRO closed forms, the activation count of our forward and the backward walk that finds
// the peak (see memory_model.hpp; the derivation is in docs/cost-models.md).
#include "analysis/cost/memory_model.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "analysis/cost/pipeline_model.hpp"
#include "lab/dtype.hpp"
#include "lab/unit_layout.hpp"
#include "strategies/catalog.hpp"

namespace dtlab::analysis {

ZeroBytes zero_bytes_per_rank(double params, int ranks, ZeroStage stage, double optimizer_bytes_per_param) {
  if (params < 0 || ranks < 1)
    throw std::invalid_argument("zero_bytes_per_rank: needs params >= 0 and ranks >= 1, got params=" +
                                std::to_string(params) + " ranks=" + std::to_string(ranks));
  const double n = ranks;
  ZeroBytes z{2 * params, 2 * params, optimizer_bytes_per_param * params};
  switch (stage) {
    case ZeroStage::ddp:
      break;
    case ZeroStage::zero1:
      z.optimizer /= n;
      break;
    case ZeroStage::zero2:
      z.optimizer /= n;
      z.grads /= n;
      break;
    case ZeroStage::zero3:
      z.optimizer /= n;
      z.grads /= n;
      z.params /= n;
      break;
  }
  return z;
}

double fsdp_peak_param_elements(const std::vector<int64_t>& unit_numel, int shard_factor) {
  if (shard_factor < 1) throw std::invalid_argument("fsdp_peak_param_elements: shard_factor must be >= 1");
  double sharded = 0, largest = 0;
  for (int64_t n : unit_numel) {
    sharded += static_cast<double>(n) / shard_factor;
    largest = std::max(largest, static_cast<double>(n));
  }
  return sharded + largest;
}

namespace {

// The shapes one rank's activations have: T tokens of the micro-batch, and under tensor parallelism (t ranks) the
// heads, the hidden width and the vocabulary split by t; with sequence parallelism the norm and residual regions
// hold T/t tokens (`seq` = t), else all of them (`seq` = 1).
struct Dims {
  int64_t T, d, f, H, V, c, t, seq;
  bool sp;
};

Dims dims_of(const Config& config) {
  const ModelConfig& m = config.model;
  const int64_t t = std::max<int64_t>(1, config.parallel.tp);
  const bool sp = t > 1 && config.parallel.sequence_parallel;
  return {config.train.micro_batch * m.seq_len,
          m.d_model,
          m.ffn_hidden / t,
          m.n_heads / t,
          m.vocab_size / t,
          bytes_of(dtype_named(config.precision.param_dtype, "precision.param_dtype")),
          t,
          sp ? t : 1,
          sp};
}

enum class BlockMode { none, full, selective };

BlockMode block_mode(const Config& config, int64_t index) {
  const std::string& ac = config.parallel.activation_checkpointing;
  if (ac == "none") return BlockMode::none;
  if (ac == "selective") return BlockMode::selective;
  if (ac == "full")
    return index % std::max<int64_t>(1, config.parallel.checkpoint_every) == 0 ? BlockMode::full : BlockMode::none;
  throw std::invalid_argument("parallel.activation_checkpointing='" + ac + "' is not one of none | full | selective");
}

}  // namespace

BlockActivationBytes block_activation_bytes(const Config& config) {
  const Dims x = dims_of(config);
  BlockActivationBytes b;
  if (!x.sp) {
    b.norm = 8 * x.T * x.d + x.c * x.T * x.d + 4 * x.T;  // its output is the column-parallel linears' input
    b.attention = 5 * x.c * x.T * x.d / x.t + 4 * x.T * x.H;
    b.mlp = 4 * x.c * x.T * x.f;
    return b;
  }
  // Sequence parallel: the norm runs on T/t tokens and its output goes to the all-gather (not saved); the
  // gathered [T, d] input of each half's column-parallel linears is saved by them.
  b.norm = (8 * x.T * x.d + 4 * x.T) / x.seq;
  b.attention = 5 * x.c * x.T * x.d / x.t + 4 * x.T * x.H + x.c * x.T * x.d;
  b.mlp = 4 * x.c * x.T * x.f + x.c * x.T * x.d;
  return b;
}

int64_t block_saved_bytes(const Config& config, int64_t index) {
  const Dims x = dims_of(config);
  const BlockActivationBytes b = block_activation_bytes(config);
  const int64_t input = x.c * x.T * x.d / x.seq;
  switch (block_mode(config, index)) {
    case BlockMode::none:
      return b.block();
    case BlockMode::full:
      return input;
    case BlockMode::selective:
      return input + b.norm + b.mlp;
  }
  return b.block();
}

ActivationPeak activation_peak(const Config& config, bool sharded) {
  const Dims x = dims_of(config);
  const BlockActivationBytes b = block_activation_bytes(config);
  const int64_t L = config.model.n_layers;
  const int64_t input = x.c * x.T * x.d / x.seq;      // a block's input (the residual stream)
  const int64_t shared_input = x.c == 4 ? input : 0;  // fp32: the first norm keeps the input itself
  const int64_t head_dim = x.d / config.model.n_heads;
  // Inputs and targets (int64), the model's fp32 RoPE tables (cos, sin: [seq_len, head_dim/2] each; not a state
  // category, so the counting allocator's peak carries them) and, for sharded strategies, the unit-output
  // gradient their backward hooks keep.
  const int64_t batch = 2 * x.T * 8 + 4 * config.model.seq_len * head_dim + (sharded ? input : 0);
  // log_softmax output, fp32 (the loss upcasts); under tensor parallelism the vocabulary-parallel loss keeps the
  // exponentials of this rank's [T, V/t] shifted logits instead.
  const int64_t log_probs = 4 * x.T * x.V;
  const int64_t head_input = x.sp ? x.c * x.T * x.d : 0;  // sequence parallel: the head's gathered input
  // SwiGLU backward: the product's gradient plus w_down's weight-gradient temporary, then the gradients of
  // silu(gate) and up (the product's own storage is released by then).
  const int64_t mlp_backward = std::max(2 * x.c * x.T * x.f, x.c * x.T * x.f + x.c * x.d * x.f);

  std::vector<int64_t> before(static_cast<size_t>(L) + 1, batch);  // saved by blocks < k, plus the batch
  for (int64_t k = 0; k < L; ++k)
    before[static_cast<size_t>(k) + 1] = before[static_cast<size_t>(k)] + block_saved_bytes(config, k);
  const int64_t forward_end = before[static_cast<size_t>(L)] + b.norm + head_input + log_probs;

  ActivationPeak peak;
  peak.forward_end = forward_end;
  auto consider = [&](int64_t activations, int64_t logits, const std::string& phase) {
    if (activations + logits > peak.activations + peak.logits) {
      peak.activations = activations;
      peak.logits = logits;
      peak.phase = phase;
    }
  };
  peak.block_backward.resize(static_cast<size_t>(L));
  auto consider_block = [&](int64_t k, int64_t activations, const std::string& phase) {
    consider(activations, 0, phase);
    ActivationPeak::Moment& m = peak.block_backward[static_cast<size_t>(k)];
    if (activations > m.activations) m = {activations, phase};
  };
  const int64_t without_logits = forward_end - log_probs;
  // Loss backward: nll_loss's and log_softmax's gradients, both [T, V] fp32, next to the saved log-probs.
  consider(without_logits, log_probs + 2 * 4 * x.T * x.V, "loss backward");
  // LM head backward: the logits' gradient, the head input's gradient and the [V, d] weight-gradient temporary.
  consider(without_logits + x.c * x.T * x.d + x.c * x.V * x.d, 4 * x.T * x.V, "head backward");
  // Final RMSNorm backward (composite, fp32): three [T, d] fp32 temporaries (+ the 16-bit gradient copy).
  consider(without_logits + (16 - x.c) * x.T * x.d / x.seq, 0, "final norm backward");
  for (int64_t k = L - 1; k >= 0; --k) {
    const int64_t base = before[static_cast<size_t>(k)];
    const std::string phase = "block " + std::to_string(k) + " backward";
    switch (block_mode(config, k)) {
      case BlockMode::none:
        consider_block(k, base + b.block() + input + mlp_backward, phase);
        break;
      case BlockMode::full:  // the recomputed block's tensors + its output + the gradient flowing in
        consider_block(k, base + input + b.block() - shared_input + 2 * input + mlp_backward, phase + " (recomputed)");
        break;
      case BlockMode::selective:
        consider_block(k, base + block_saved_bytes(config, k) + input + mlp_backward, phase + " (MLP half)");
        // The recomputed attention half and SDPA's three input gradients.
        consider_block(k, base + input + b.norm + b.attention - shared_input + 2 * input + 3 * input,
                       phase + " (recomputed attention)");
        break;
    }
  }
  return peak;
}

int64_t ring_reduce_scatter_scratch_bytes(const PlannedCollective& c) {
  const int64_t element = bytes_of(dtype_named(c.dtype, "cost plan collective dtype"));
  const int64_t chunk = (c.bytes / element + c.group_size - 1) / c.group_size;
  return 2 * chunk * element;
}

MemoryPrediction predict_memory(const Config& config, const CostPlan& plan, const std::string& comm_backend) {
  MemoryPrediction m;
  const bool sharded = strategy_spec(plan.strategy).hooks_unit_outputs;
  m.params = plan.state.params;
  m.grads = plan.state.grads;
  m.optimizer = plan.state.optimizer;
  m.buffers = plan.state.buffers;
  const ActivationPeak a = activation_peak(config, sharded);
  m.activations = a.activations;
  m.logits = a.logits;
  m.peak_phase = a.phase;
  int64_t largest_gather = 0;
  for (const auto& c : plan.collectives)
    if (c.op == "all_gather" && c.algorithm == "backend" && c.phase == "backward" && c.mesh_dim == "dp")
      largest_gather = std::max(largest_gather, c.bytes);
  // Gloo stages a prefetched unit's gather: only plans that re-gather in backward (with Gloo's own all-gather; the
  // lab's ring, as in DDP's hierarchical all-reduce, writes in place) prefetch into its peak.
  if (comm_backend == "gloo" && config.parallel.prefetch && largest_gather > 0) {
    m.comm_staging = largest_gather;
    if (largest_gather > 0)
      m.notes.push_back("peak includes " + std::to_string(largest_gather) +
                        " bytes of Gloo's all-gather staging buffer for the prefetched unit (timing-dependent: "
                        "absent when the gather finishes before the backward's peak)");
  }
  // The ring's scratch per backward ring reduce-scatter, in the plan's order: two chunks of its wire dtype. The
  // sharded engine issues one per unit, in unit order; DDP's hierarchical all-reduce one per bucket piece.
  // A hierarchical one (two calls of one unit, lab/comm/hierarchical.hpp) holds the node's block (one chunk of the
  // call inside the node) from before its first level to the end of its second: block + the first level's scratch.
  std::vector<int64_t> ring;
  int last_unit = -1;
  for (const auto& c : plan.collectives) {
    // The data-parallel strategy's calls only: tensor parallelism's run synchronously inside a layer's backward,
    // their scratch freed before the next layer's (not a peak the schedule can stack).
    if (c.op != "reduce_scatter" || c.algorithm != "ring" || c.phase != "backward" || c.group_size < 2 ||
        c.mesh_dim != "dp")
      continue;
    if (c.unit >= 0 && c.unit == last_unit) continue;  // the second level: inside the first's lifetime, smaller
    last_unit = c.unit;
    const int64_t scratch = ring_reduce_scatter_scratch_bytes(c);
    ring.push_back(c.unit >= 0 ? scratch + scratch / 2 : scratch);
  }
  const auto groups = wrap_unit_groups(config.parallel.wrap, static_cast<int>(config.model.n_layers));
  const bool per_unit = sharded && ring.size() == groups.size();
  for (size_t k = 0; k < a.block_backward.size(); ++k) {
    int64_t scratch = 0;  // block k is model unit k + 1; a unit whose first model unit is later has finished
    for (size_t u = 0; u < ring.size(); ++u)
      if (!per_unit || groups[u].front() > static_cast<int>(k) + 1) scratch = std::max(scratch, ring[u]);
    const ActivationPeak::Moment& moment = a.block_backward[k];
    if (scratch > 0 && moment.activations + scratch > m.activations + m.logits + m.ring_scratch) {
      m.activations = moment.activations;
      m.logits = 0;
      m.peak_phase = moment.phase;
      m.ring_scratch = scratch;
    }
  }
  if (m.ring_scratch > 0)
    m.notes.push_back("peak includes " + std::to_string(m.ring_scratch) +
                      " bytes of the ring reduce-scatter's scratch (two chunks of a later unit's gradient, in flight "
                      "beside this block's backward; timing-dependent: absent when the ring finishes first)");
  m.peak = m.params + m.grads + m.optimizer + m.buffers + m.activations + m.logits + m.comm_staging + m.ring_scratch;
  m.host = plan.state.host;
  m.device_peak = m.peak - m.host;
  m.notes.push_back("memory peak at the " + m.peak_phase + " of a micro-batch of " +
                    std::to_string(config.train.micro_batch) + " x " + std::to_string(config.model.seq_len) +
                    " tokens; buffers counted whole (the plan's gathered units and wire copies)");
  return m;
}

MemoryPrediction rank_memory(const Config& config, int rank, const std::string& comm_backend) {
  // A pipeline stage keeps its schedule's micro-batches in flight.
  return config.parallel.pp > 1 ? pipeline_stage_memory(config, cost_plan(config, rank), comm_backend, rank)
                                : predict_memory(config, cost_plan(config, rank), comm_backend);
}

MemoryPrediction largest_rank_peak_memory(const Config& config, const std::string& comm_backend) {
  const int64_t stages = std::max<int64_t>(1, config.parallel.pp);
  const int64_t per_stage = std::max<int64_t>(1, config.world_size / stages);
  std::optional<MemoryPrediction> best;
  for (int64_t stage = 0; stage < stages; ++stage) {
    const int64_t first = stage * per_stage, last = first + per_stage - 1;
    for (const int64_t rank : {first, last}) {
      MemoryPrediction m = rank_memory(config, static_cast<int>(rank), comm_backend);
      if (!best || m.device_peak > best->device_peak) best = std::move(m);
      if (last == first) break;  // a stage of one rank
    }
  }
  return *best;
}

}  // namespace dtlab::analysis
