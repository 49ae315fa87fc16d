// ddp_cost.cpp: the spec of `ddp` — one all-reduce per gradient bucket per optimizer step (buckets as ddp.cpp
// builds them), a parameter broadcast at setup; every rank holds full params, grads and optimizer state, plus
// reduce-dtype wire buffers when reducing in 16 bits. Schedule: each bucket's all-reduce starts when its last
// gradient is ready in the last micro-step's backward (reverse order) and overlaps the rest of it.
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

CostPlan ddp_plan(const Config& config, int /*rank*/) {
  CostPlan plan;
  plan.strategy = "ddp";
  const auto shapes = param_shapes(config.model);
  std::vector<int64_t> grad_bytes;
  int64_t numel = 0;
  for (const auto& p : shapes) {
    grad_bytes.push_back(p.numel * 4);
    numel += p.numel;
  }
  const int world = static_cast<int>(config.world_size);
  const Dtype wire = dtype_named(config.precision.reduce_dtype, "precision.reduce_dtype");
  const int64_t wire_bytes_per_element = bytes_of(wire);
  const std::string wire_dtype(torch_name(wire));
  for (const auto& p : shapes)  // one in-place broadcast per parameter tensor (ddp.cpp)
    plan.collectives.push_back(
        {"broadcast", "backend", "float32", p.numel * 4, world, "setup", 1, p.name + " from rank 0"});
  const BucketLayout layout = assign_buckets(grad_bytes, bucket_cap_bytes(config), kFirstBucketCapBytes);
  for (size_t b = 0; b < layout.buckets.size(); ++b) {
    int64_t bucket_numel = 0;
    for (int i : layout.buckets[b]) bucket_numel += shapes[static_cast<size_t>(i)].numel;
    plan.collectives.push_back({"all_reduce", "backend", wire_dtype, bucket_numel * wire_bytes_per_element, world,
                                "backward", 1, "bucket " + std::to_string(b)});
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

// A bucket is complete when its earliest parameter's gradient is; backward work is attributed to each parameter
// by its elements (the embedding's gradient comes last and costs nothing extra).
double bucket_overlap(const ScheduleInput& in) {
  const std::vector<double> all_reduce = calls_by_role(in).all_reduce;
  const auto shapes = param_shapes(in.config.model);
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
  for (size_t b = 0; b < layout.buckets.size(); ++b) {
    int first = static_cast<int>(shapes.size());
    for (int i : layout.buckets[b]) first = std::min(first, i);
    double done = 0;  // backward work of parameters >= first (reverse order)
    for (size_t i = static_cast<size_t>(first); i < shapes.size(); ++i) done += weight[i];
    issue_at.push_back(total > 0 ? in.backward_ms * done / total : 0);
    durations.push_back(all_reduce[b]);
  }
  return overlapped_tail(issue_at, durations, in.backward_ms);
}

}  // namespace

extern const StrategySpec ddp_spec;
const StrategySpec ddp_spec{
    .id = "ddp",
    .doc = "full replicas; gradients all-reduced in buckets that overlap the backward pass",
    .keys = {"parallel.bucket_cap_mb", "parallel.collectives", "parallel.activation_checkpointing",
             "parallel.checkpoint_every"},
    .check = &check,
    .plan = &ddp_plan,
    .exposed_comm_ms = &bucket_overlap,
};

}  // namespace dtlab
