// schedule.hpp: when a sharded strategy gathers and frees each flat unit's parameters and reduces its gradients,
// per mode (traits(mode), sharding.hpp): all-gathers before forward and backward (with parallel.prefetch the next
// unit's, in forward order in forward and reverse order in backward, started before the current unit computes),
// reduce-scatters or all-reduces from post-accumulate-grad hooks, the replica all-reduce, the all-gather after the
// optimizer step. Comm tags: fsdp.params.<unit>, fsdp.grads.<unit>, fsdp.replicas.<unit>, zero1.params.<unit>.
//
// A unit's reduce-scatter is issued in its gradient hook and left in flight (the ring runs on its own thread,
// lab/comm/comm.hpp): it overlaps the backward of the unit before, as FSDP2's reduce-scatter stream does. At most
// one is in flight: the next unit's hook, or the end of backward (finish_backward), waits for it, moves its output
// into the gradient shard and frees the unit's full gradient. That costs one more unit's gradient at the peak
// (unit_buffers_peak_bytes, sharding.hpp).
//
// Offloaded on a GPU (pinned host shards): the host shard's copy to the device before a gather is queued without the
// host waiting (non_blocking; the optimizer writes the host shards only after the step's last gradient copy, which
// comes after every gather), and the reduced gradient's copy back runs on a copy stream (finish_host_copy).
#pragma once

#include <cstddef>
#include <vector>

#include "lab/device.hpp"
#include "strategies/sharded/flat_unit.hpp"
#include "strategies/sharded/groups.hpp"

namespace dtlab {

class ShardedSchedule {
 public:
  // `units` and `groups` outlive the schedule and keep their addresses.
  ShardedSchedule(ShardingMode mode, std::vector<FlatUnit>& units, const ShardGroups& groups,
                  const ShardedPrecision& precision, bool prefetch, CommAlgorithm reduce_scatter_algorithm);

  // A post-accumulate-grad hook on every parameter view: counts the unit's gradients (on_grad_ready).
  void register_grad_hooks();
  // Gradients are reduced only on the last micro-step, except in modes that reduce-scatter every micro-step.
  void begin_micro_step(bool is_last_micro) { is_last_micro_ = is_last_micro; }

  void before_unit_forward(size_t u);   // unit u gathered, the next one prefetched
  void after_unit_forward(size_t u);    // frees unit u where the mode does (never the last: needed right away)
  void before_unit_backward(size_t u);  // unit u gathered, its gradient buffer ready, the previous one prefetched
  void on_grad_ready(size_t u);         // one parameter's gradient of unit u has been accumulated
  // The end of a micro-step's backward: the reduce-scatter still in flight is finished, and its gradient shard is
  // on the host when offloaded.
  void finish_backward() {
    finish_pending_reduce();
    finish_host_copy();
  }

  // Under pipeline stages, before the schedule runs. once_per_step: every unit's parameters ready now — no_shard's
  // compute copy refreshed from the master the optimizer updated; the modes that free them (full_shard,
  // shard_grad_op, hybrid) gather every unit of the stage once, with a zeroed full gradient beside it, and keep both
  // through the flush. That is FSDP's reshard_after_forward=False, torchtitan's choice under a pipeline; the gradient
  // hooks then reduce nothing, the schedule's backwards accumulate into the full gradients.
  // per_micro_batch (parallel.pp_reshard_after_forward; full_shard and hybrid): nothing is gathered now; the schedule
  // runs each chunk's units with the forward hooks (before_unit_forward, after_unit_forward, which frees every unit,
  // and before_unit_backward from its output's gradient; prefetches stay inside the chunk). A B is one micro-batch's
  // whole backward of one chunk, so each unit's hook reduce-scatters its gradient into the shard and frees it, as
  // without stages every micro-step; after_chunk_backward finishes the last reduce-scatter.
  // per_micro_batch_after_w (the same under zero bubble): B leaves the linears' gradients to W, so the hooks reduce
  // nothing; after B the chunk's parameters are freed (W needs none), before W prepare_chunk_gradients, after W
  // reduce_chunk.
  void begin_pipeline_step(PipelineGathers gathers);
  void after_chunk_backward(int chunk);
  // Zero bubble's W of `chunk`: its units' full gradients exist (zeroed when re-allocated) for the linears' weights.
  void prepare_chunk_gradients(int chunk);
  // After zero bubble's W: the micro-batch's gradients of `chunk` are complete; each unit's full gradient is
  // reduce-scattered into its shard (last unit first, one in flight) and the last one finished.
  void reduce_chunk(int chunk);
  // Under pipeline stages, after the flush. Gathered once: every unit's full gradient holds the step's micro-batches;
  // each is reduced now (all-reduced or reduce-scattered), last unit first, and the modes that free their
  // parameters free them, then the last reduce-scatter is finished. Per micro-batch: everything was reduced already.
  void reduce_after_flush();
  // After backward: the gradient shard of `unit` holds the gradient summed over every rank (not yet averaged).
  void finish_unit_gradients(FlatUnit& unit);
  void wait_pending_gathers();
  // After the optimizer updated the master shards: the compute parameters follow them.
  void refresh_params_after_step();

 private:
  void start_gather(FlatUnit& unit);
  void ensure_gathered(FlatUnit& unit);
  void release_params(FlatUnit& unit);
  at::Tensor reduce_input(FlatUnit& unit);
  // The once-per-step reduction of a unit's accumulated full gradient (no_shard: all-reduce; zero1: reduce-scatter).
  void reduce_accumulated(FlatUnit& unit);
  // Issues the reduce-scatter of the unit's full gradient over the shard group into reduce_out (after finishing
  // the one in flight); finish_pending_reduce moves reduce_out into the gradient shard (added when `accumulate`).
  void start_reduce_scatter(FlatUnit& unit, bool accumulate);
  void finish_pending_reduce();
  // Offloaded on a GPU, a reduced gradient goes to the host on the copy stream and is added into (or copied to) its
  // host shard here, one unit later: the host keeps queueing the next unit's backward meanwhile.
  void finish_host_copy();

  ShardingTraits traits_;
  std::vector<FlatUnit>& units_;
  const ShardGroups& groups_;
  ShardedPrecision precision_;
  bool prefetch_;
  CommAlgorithm algorithm_;
  bool is_last_micro_ = true;
  bool pipelined_ = false;  // a pipeline schedule runs the micro-batches (begin_pipeline_step)
  PipelineGathers gathers_ = PipelineGathers::none;
  bool per_micro_batch() const {
    return gathers_ == PipelineGathers::per_micro_batch || gathers_ == PipelineGathers::per_micro_batch_after_w;
  }
  void release_chunk(int chunk);
  bool same_chunk(size_t u, size_t v) const { return units_[u].chunk == units_[v].chunk; }
  FlatUnit* reducing_ = nullptr;  // the unit whose reduce-scatter is in flight, if any
  bool reducing_accumulates_ = false;
  CommHandle reduce_;
  CopyStream copies_;            // offload on a GPU: device -> pinned host copies of reduced gradients
  FlatUnit* copying_ = nullptr;  // the unit whose reduced gradient is on its way to the host, if any
  bool copying_accumulates_ = false;
  at::Tensor copy_staging_;  // its pinned host copy
};

}  // namespace dtlab
