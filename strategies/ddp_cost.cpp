// ddp_cost.cpp: cost plan of `ddp` — one all-reduce per gradient bucket per optimizer step (buckets as
// ddp.cpp builds them), a parameter broadcast at setup; every rank holds full params, grads and
// optimizer state, plus reduce-dtype wire buffers when reducing in 16 bits.
#include "strategies/cost_plan.hpp"
#include "strategies/ddp_buckets.hpp"

namespace dtlab {

CostPlan ddp_cost_plan(const Config& config) {
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
  const int64_t wire_bytes_per_element = config.precision.reduce_dtype == "fp32" ? 4 : 2;
  const std::string wire_dtype = config.precision.reduce_dtype == "fp32"   ? "float32"
                                 : config.precision.reduce_dtype == "bf16" ? "bfloat16"
                                                                           : "float16";
  for (const auto& p : shapes)  // one in-place broadcast per parameter tensor (ddp.cpp)
    plan.collectives.push_back(
        {"broadcast", "backend", "float32", p.numel * 4, world, "setup", 1, p.name + " from rank 0"});
  const auto cap = static_cast<int64_t>(config.parallel.bucket_cap_mb * 1024.0 * 1024.0);
  const BucketLayout layout = assign_buckets(grad_bytes, cap, kFirstBucketCapBytes);
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

}  // namespace dtlab
