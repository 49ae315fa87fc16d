// groups.cpp: shard and replica group construction for the sharded strategies (see groups.hpp).
#include "strategies/sharded/groups.hpp"

#include <string>
#include <vector>

#include "lab/comm/comm.hpp"

namespace dtlab {

ShardGroups make_shard_groups(ShardingMode mode, const Config& config, MeshComms& comms) {
  World& world = comms.world();
  const int world_size = world.world_size(), k = world.local_world_size();
  const int dp = comms.size_of(kDataParallelDims);
  if (config.parallel.collectives == "hierarchical" && traits(mode).shard_group == ShardGroup::world &&
      !job_spans_nodes(world_size, k))
    throw std::invalid_argument("parallel.strategy=" + config.parallel.strategy +
                                " with parallel.collectives=hierarchical needs a job across nodes (LOCAL_WORLD_SIZE " +
                                std::to_string(k) + " < WORLD_SIZE " + std::to_string(world_size) +
                                ", e.g. dtlab launch --nodes 2); use flat or auto");
  if (config.parallel.collectives == "hierarchical" && dp != world_size)
    throw std::invalid_argument("parallel.strategy=" + config.parallel.strategy +
                                " with parallel.collectives=hierarchical needs the data-parallel group to be the world "
                                "(mesh " +
                                comms.mesh().describe() + "); use flat or auto");
  ShardGroups groups;
  switch (traits(mode).shard_group) {
    case ShardGroup::world:  // every data-parallel rank holds one shard
      groups.shard = &comms.data_parallel();
      groups.size = dp;
      break;
    case ShardGroup::none:  // every data-parallel rank a replica
      groups.replica = &comms.data_parallel();
      groups.size = 1;
      break;
    case ShardGroup::shard_size:  // the mesh's dp_shard x dp_replicate (strategies/catalog.cpp parallel_dims)
      groups.size = comms.size_of({MeshDim::dp_shard});
      if (groups.size == dp) {
        groups.shard = &comms.data_parallel();
      } else {
        groups.shard = &comms.comm({MeshDim::dp_shard});
        groups.replica = &comms.comm({MeshDim::dp_replicate});
      }
      break;
  }
  groups.rank = groups.shard ? groups.shard->rank() : 0;
  if (dp == world_size && uses_hierarchical_shard_collectives(mode, config.parallel.collectives, world_size, k)) {
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
