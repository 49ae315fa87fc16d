// node_layout.hpp: whether a job spans nodes, the one rule every part of the lab uses for it (torch-free): the
// hierarchical collectives (strategies/ddp_buckets.hpp, strategies/sharded/sharding.hpp), HYBRID's default shard
// group, the two-level comm model (analysis/cost/predict.cpp) and the commands that pick a topology (lab/cli/).
#pragma once

#include <cstdint>

namespace dtlab {

// A job of `world` ranks spans nodes of `ranks_per_node` ranks each when that count is known (≥ 1), smaller than the
// world and divides it (Config::ranks_per_node, LOCAL_WORLD_SIZE; 0 = unknown or one node).
inline bool job_spans_nodes(int64_t world, int64_t ranks_per_node) {
  return ranks_per_node >= 1 && ranks_per_node < world && world % ranks_per_node == 0;
}

}  // namespace dtlab
