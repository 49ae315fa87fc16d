// groups.cpp: shard and replica group construction for the sharded strategies (see groups.hpp).
#include "strategies/sharded/groups.hpp"

#include <string>
#include <vector>

#include "lab/comm/comm.hpp"

namespace dtlab {

ShardGroups make_shard_groups(ShardingMode mode, const Config& config, World& world) {
  ShardGroups groups;
  Comm& all = world.comm();
  const int world_size = world.world_size();
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
  return groups;
}

}  // namespace dtlab
