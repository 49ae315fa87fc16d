// ddp_cost.cpp: the spec of `ddp` — one all-reduce per gradient bucket per optimizer step (buckets as ddp.cpp
// builds them), a parameter broadcast at setup; every rank holds full params, grads and optimizer state, plus
// reduce-dtype wire buffers when reducing in 16 bits. Schedule: each bucket's all-reduce starts when its last
// gradient is ready in the last micro-step's backward (reverse order) and overlaps the rest of it. With the
// hierarchical all-reduce (parallel.collectives, on a job across nodes) each bucket is three calls per 16 MiB
// piece: reduce-scatter in the node, all-reduce across nodes (stride K), all-gather in the node.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "lab/dtype.hpp"
#include "strategies/ddp_buckets.hpp"
#include "strategies/schedule_kit.hpp"
#include "strategies/spec.hpp"

namespace dtlab {
namespace {

int64_t bucket_cap_bytes(const Config& config) {
  return static_cast<int64_t>(config.parallel.bucket_cap_mb * 1024.0 * 1024.0);
}

// The hierarchical all-reduce's pieces (lab/comm/hierarchical.hpp: buffers over 16 MiB go in 16 MiB pieces).
constexpr int64_t kHierarchicalPieceBytes = int64_t{16} << 20;

// One bucket's all-reduce as lab/comm runs it: one flat all-reduce over the data-parallel group, or per piece a ring
// reduce-scatter inside the node, the backend all-reduce of this rank's chunk across nodes (the ranks of one
// local rank, stride K) and a ring all-gather inside the node.
void add_bucket_all_reduce(CostPlan& plan, const Config& config, int rank, int bucket, int64_t numel,
                           int64_t element_bytes, const std::string& dtype) {
  const int world = static_cast<int>(config.world_size);
  const DataParallelGroup dp_group = data_parallel_group(config);
  const int dp = dp_group.size;
  const std::string what = "bucket " + std::to_string(bucket);
  // The two levels are the world's nodes: a data-parallel group smaller than the world all-reduces flat (ddp.cpp).
  if (dp != world || !uses_hierarchical_all_reduce(config.parallel.collectives, world, config.ranks_per_node)) {
    plan.collectives.push_back(
        {"all_reduce", "backend", dtype, numel * element_bytes, dp, "backward", 1, what, dp_group.stride, bucket});
    return;
  }
  const int k = static_cast<int>(config.ranks_per_node), nodes = world / k, local = rank % k;
  const int64_t piece_numel = std::max<int64_t>(1, kHierarchicalPieceBytes / element_bytes);
  for (int64_t offset = 0; offset < numel; offset += piece_numel) {
    const int64_t n = std::min(piece_numel, numel - offset);
    const int64_t chunk = n / k + (local < n % k ? 1 : 0);
    const std::string piece = what + (numel > piece_numel ? " piece " + std::to_string(offset / piece_numel) : "");
    if (k > 1)
      plan.collectives.push_back({"reduce_scatter", "ring", dtype, n * element_bytes, k, "backward", 1,
                                  piece + " inside the node", 1, bucket});
    plan.collectives.push_back({"all_reduce", "backend", dtype, chunk * element_bytes, nodes, "backward", 1,
                                piece + " across nodes", k, bucket});
    if (k > 1)
      plan.collectives.push_back(
          {"all_gather", "ring", dtype, n * element_bytes, k, "backward", 1, piece + " inside the node", 1, bucket});
  }
}

CostPlan ddp_plan(const Config& config, int rank) {
  CostPlan plan;
  plan.strategy = "ddp";
  const auto shapes = param_shapes(config, rank);  // this rank's slices (tp) of its stage's parameters (pp)
  std::vector<int64_t> grad_bytes;
  int64_t numel = 0;
  for (const auto& p : shapes) {
    grad_bytes.push_back(p.numel * 4);
    numel += p.numel;
  }
  const DataParallelGroup dp = data_parallel_group(config);
  const Dtype wire = dtype_named(config.precision.reduce_dtype, "precision.reduce_dtype");
  const int64_t wire_bytes_per_element = bytes_of(wire);
  const std::string wire_dtype(torch_name(wire));
  for (const auto& p : shapes)  // one in-place broadcast per parameter tensor (ddp.cpp)
    plan.collectives.push_back(
        {"broadcast", "backend", "float32", p.numel * 4, dp.size, "setup", 1, p.name + " from rank 0", dp.stride});
  const BucketLayout layout = assign_buckets(grad_bytes, bucket_cap_bytes(config), kFirstBucketCapBytes);
  for (size_t b = 0; b < layout.buckets.size(); ++b) {
    int64_t bucket_numel = 0;
    for (int i : layout.buckets[b]) bucket_numel += shapes[static_cast<size_t>(i)].numel;
    add_bucket_all_reduce(plan, config, rank, static_cast<int>(b), bucket_numel, wire_bytes_per_element, wire_dtype);
    if (wire_bytes_per_element != 4) plan.state.buffers += bucket_numel * wire_bytes_per_element;
  }
  plan.state.params = numel * 4;
  plan.state.grads = numel * 4;
  plan.state.optimizer = numel * optimizer_state_bytes_per_element(config.train, 4);
  return plan;
}

void check(const Config& config) {
  if (config.parallel.offload)
    throw std::invalid_argument(
        "parallel.strategy=ddp does not combine with parallel.offload=true: DDP keeps "
        "full replicas on the device; use fsdp_full_shard with offload");
  if (config.precision.param_dtype != "fp32")
    throw std::invalid_argument("parallel.strategy=ddp with precision.param_dtype=" + config.precision.param_dtype +
                                ": mixed precision compute is not built yet; use fp32 (precision.reduce_dtype=bf16 "
                                "communicates in bf16)");
}

// Per bucket, in plan order: the time its all-reduce keeps the backward pass waiting (the hierarchical one's
// reduce-scatters inside the node run in the gradient hook), the time it runs beside backward (a flat all-reduce;
// the hierarchical one's cross-node all-reduces), and the time its wait adds after backward (the hierarchical
// one's all-gathers inside the node, run on wait).
struct BucketCalls {
  std::vector<double> in_hook, overlapped, on_wait;
};
BucketCalls bucket_calls(const ScheduleInput& in) {
  BucketCalls calls;
  int current = -1;
  for (size_t i = 0; i < in.plan.collectives.size(); ++i) {
    const PlannedCollective& c = in.plan.collectives[i];
    if (c.phase != "backward" || c.bucket < 0) continue;
    if (c.bucket != current) {
      current = c.bucket;
      calls.in_hook.push_back(0), calls.overlapped.push_back(0), calls.on_wait.push_back(0);
    }
    if (c.op == "reduce_scatter")
      calls.in_hook.back() += in.call_ms[i];
    else if (c.op == "all_gather")
      calls.on_wait.back() += in.call_ms[i];
    else
      calls.overlapped.back() += in.call_ms[i];
  }
  return calls;
}

// A bucket is complete when its earliest parameter's gradient is; backward work is attributed to each parameter
// by its elements (the embedding's gradient comes last and costs nothing extra). The hierarchical all-reduce's
// in-hook reduce-scatters delay the rest of backward; its all-gathers run after backward, on wait.
double bucket_overlap(const ScheduleInput& in) {
  const BucketCalls calls = bucket_calls(in);
  const std::vector<double>& all_reduce = calls.overlapped;
  const auto shapes = param_shapes(in.config);
  std::vector<int64_t> grad_bytes;
  double total = 0;
  std::vector<double> weight;
  for (size_t i = 0; i < shapes.size(); ++i) {
    grad_bytes.push_back(shapes[i].numel * 4);
    weight.push_back(i == 0 ? 0.0 : static_cast<double>(shapes[i].numel));
    total += weight.back();
  }
  const BucketLayout layout = assign_buckets(grad_bytes, bucket_cap_bytes(in.config), kFirstBucketCapBytes);
  if (layout.buckets.size() != all_reduce.size())
    throw std::logic_error("step model: " + in.plan.strategy + " plan has " + std::to_string(all_reduce.size()) +
                           " bucket all-reduces, the bucket layout " + std::to_string(layout.buckets.size()));
  std::vector<double> issue_at, durations;
  double in_hook = 0, on_wait = 0;  // so far: backward is that much later
  for (size_t b = 0; b < layout.buckets.size(); ++b) {
    int first = static_cast<int>(shapes.size());
    for (int i : layout.buckets[b]) first = std::min(first, i);
    double done = 0;  // backward work of parameters >= first (reverse order)
    for (size_t i = static_cast<size_t>(first); i < shapes.size(); ++i) done += weight[i];
    in_hook += calls.in_hook[b];
    on_wait += calls.on_wait[b];
    issue_at.push_back((total > 0 ? in.backward_ms * done / total : 0) + in_hook);
    durations.push_back(all_reduce[b]);
  }
  return in_hook + overlapped_tail(issue_at, durations, in.backward_ms + in_hook) + on_wait;
}

}  // namespace

extern const StrategySpec ddp_spec;
const StrategySpec ddp_spec{
    .id = "ddp",
    .doc = "full replicas; gradients all-reduced in buckets that overlap the backward pass",
    .choose_when =
        "the model, gradients and optimizer state fit on every rank: the fewest bytes (one all-reduce of the gradients "
        "per step) and the simplest overlap",
    .keys = {"parallel.bucket_cap_mb", "parallel.collectives", "parallel.activation_checkpointing",
             "parallel.checkpoint_every"},
    .check = &check,
    .plan = &ddp_plan,
    .exposed_comm_ms = &bucket_overlap,
    .runs_under_pipeline = true,
};

}  // namespace dtlab
