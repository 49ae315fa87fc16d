// groups.hpp: the process groups of a sharded strategy: the shard group (ranks that split a unit's state) and
// the replica group (ranks that hold the same shard: the world for no_shard, across shard groups for hybrid).
#pragma once

#include <memory>

#include "lab/config.hpp"
#include "lab/world.hpp"
#include "strategies/sharded/sharding.hpp"

namespace dtlab {

struct ShardGroups {
  Comm* shard = nullptr;    // nullptr: no shard group (no_shard)
  Comm* replica = nullptr;  // nullptr: no replicas (every mode but no_shard, and hybrid over the whole world)
  int size = 1;             // F, the shard group size
  int rank = 0;             // this rank's place in the shard group
  std::shared_ptr<Comm> owned_shard, owned_replica;  // hybrid: the groups split from the world
};

// The groups of `mode` (traits(mode).shard_group). Hybrid shard groups are parallel.shard_size consecutive ranks;
// throws std::invalid_argument when that size does not divide the world.
ShardGroups make_shard_groups(ShardingMode mode, const Config& config, World& world);

}  // namespace dtlab
