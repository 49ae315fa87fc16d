// groups.hpp: the process groups of a sharded strategy: the shard group (ranks that split a unit's state) and
// the replica group (ranks that hold the same shard: the data-parallel group for no_shard, across shard groups for
// hybrid), taken from the mesh's communicators (lab/dist/mesh_comms.hpp).
#pragma once

#include <memory>
#include <string>

#include "lab/comm/hierarchical.hpp"
#include "lab/config.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/world.hpp"
#include "strategies/sharded/sharding.hpp"

namespace dtlab {

struct ShardGroups {
  Comm* shard = nullptr;    // nullptr: no shard group (no_shard)
  Comm* replica = nullptr;  // nullptr: no replicas (every mode but no_shard, and hybrid over the whole world)
  int size = 1;             // F, the shard group size
  int rank = 0;             // the chunk of each unit this rank holds: its place in the shard group, or l*M + m below
  // Set when the shard group (the world) gathers and reduce-scatters in two levels, node then nodes
  // (parallel.collectives=hierarchical on a job across nodes; lab/comm/hierarchical.hpp).
  std::unique_ptr<HierarchicalComm> two_level;

  // The shard group's collectives on a unit's flat buffer: flat over `shard`, or in two levels. Asynchronous.
  CommHandle all_gather(at::Tensor& output, at::Tensor& input, const std::string& tag) const;
  CommHandle reduce_scatter(at::Tensor& output, at::Tensor& input, CommAlgorithm algorithm,
                            const std::string& tag) const;
};

// The groups of `mode` (traits(mode).shard_group), from the mesh's communicators: the data-parallel group, or for
// hybrid its dp_shard (parallel.shard_size consecutive data-parallel ranks) and dp_replicate groups. Throws
// std::invalid_argument when parallel.collectives=hierarchical is asked for on a job that does not span nodes or
// whose data-parallel group is not the world.
ShardGroups make_shard_groups(ShardingMode mode, const Config& config, MeshComms& comms);

}  // namespace dtlab
