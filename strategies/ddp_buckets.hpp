// ddp_buckets.hpp: how DDP groups gradients into buckets, and which all-reduce it sends them with (torch-free; used by
// ddp.cpp and ddp_cost.cpp, so the plan and the strategy cannot disagree).
//
// Walk the parameters in reverse model order (the order backward produces their gradients) and fill
// buckets up to a byte cap; the first bucket has its own small cap (1 MiB by default) so the first
// all-reduce starts early in backward (never larger than the general cap). A parameter larger than the
// cap gets a bucket of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/node_layout.hpp"

namespace dtlab {

struct BucketLayout {
  std::vector<std::vector<int>> buckets;  // parameter indices (model order), each bucket in reverse order
};

// `param_bytes[i]`: gradient bytes of parameter i (model order). Caps in bytes; cap <= 0 = unlimited.
BucketLayout assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes, int64_t first_cap_bytes);

inline constexpr int64_t kFirstBucketCapBytes = 1 << 20;

// parallel.collectives resolved for a job of `world` ranks, `ranks_per_node` per node (0 = unknown: one node):
// true = the hierarchical all-reduce (lab/comm/hierarchical.hpp). hierarchical: when the job spans nodes
// (job_spans_nodes, lab/node_layout.hpp); auto: when it spans nodes with more than one rank on each (with one, both
// levels' work is the flat ring's); flat: never.
inline bool uses_hierarchical_all_reduce(const std::string& collectives, int64_t world, int64_t ranks_per_node) {
  if (!job_spans_nodes(world, ranks_per_node)) return false;
  return collectives == "hierarchical" || (collectives == "auto" && ranks_per_node > 1);
}

}  // namespace dtlab
