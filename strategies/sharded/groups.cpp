// groups.cpp: shard and replica group construction for the sharded strategies (see groups.hpp).
#include "strategies/sharded/groups.hpp"

#include <string>
#include <vector>

#include "lab/comm/comm.hpp"

namespace dtlab {

ShardGroups make_shard_groups(ShardingMode mode, const Config& config, World& world) {
  const int world_size = world.world_size(), k = world.local_world_size();
  if (config.parallel.collectives == "hierarchical" && traits(mode).shard_group == ShardGroup::world &&
      !job_spans_nodes(world_size, k))
    throw std::invalid_argument("parallel.strategy=" + config.parallel.strategy +
                                " with parallel.collectives=hierarchical needs a job across nodes (LOCAL_WORLD_SIZE " +
                                std::to_string(k) + " < WORLD_SIZE " + std::to_string(world_size) +
                                ", e.g. dtlab launch --nodes 2); use flat or auto");
  ShardGroups groups;
  Comm& all = world.comm();
  switch (traits(mode).shard_group) {
    case ShardGroup::world:
      groups.shard = &all;
      groups.size = world_size;
      break;
    case ShardGroup::none:
      groups.replica = &all;
      groups.size = 1;
      break;
    case ShardGroup::shard_size: {
      const int f =
          static_cast<int>(shard_group_size(mode, world_size, config.parallel.shard_size, config.ranks_per_node));
      groups.size = f;
      std::vector<std::vector<int>> shard_groups(static_cast<size_t>(world_size / f)),
          replica_groups(static_cast<size_t>(f));
      for (int r = 0; r < world_size; ++r) {
        shard_groups[static_cast<size_t>(r / f)].push_back(r);
        replica_groups[static_cast<size_t>(r % f)].push_back(r);
      }
      if (f == world_size) {
        groups.shard = &all;
      } else {
        groups.owned_shard = world.split("fsdp_shard", shard_groups);
        groups.shard = groups.owned_shard.get();
        groups.owned_replica = world.split("fsdp_replica", replica_groups);
        groups.replica = groups.owned_replica.get();
      }
      break;
    }
  }
  groups.rank = groups.shard ? groups.shard->rank() : 0;
  if (uses_hierarchical_shard_collectives(mode, config.parallel.collectives, world_size, k)) {
    groups.two_level = std::make_unique<HierarchicalComm>(world, k);
    groups.rank = groups.two_level->chunk_index();
  }
  return groups;
}

CommHandle ShardGroups::all_gather(at::Tensor& output, at::Tensor& input, const std::string& tag) const {
  if (two_level) return two_level->all_gather(output, input, tag);
  return shard->all_gather(output, input, CommAlgorithm::backend, tag);
}

CommHandle ShardGroups::reduce_scatter(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm,
                                       const std::string& tag) const {
  if (two_level) return two_level->reduce_scatter(output, input, tag);  // the ring at both levels
  return shard->reduce_scatter(output, input, algorithm, tag);
}

}  // namespace dtlab
