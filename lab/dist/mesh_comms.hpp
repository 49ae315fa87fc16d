// mesh_comms.hpp: the job's communicators, one per dimension of the device mesh (lab/mesh.hpp), built in one place.
//
// Every rank constructs MeshComms once, with the same mesh, before anything communicates (it is collective: the
// sub-groups are World::split calls, made by every rank in the same order). A dimension's group that holds the
// whole world is the world's own communicator (no second communicator over the same ranks); every other group is
// a split named after its dimension ("tp", "dp_shard", "dp", ...), made here for every rank at once, except a group
// of one rank, made when first asked for (it involves no other rank, and most runs never ask). The runtime pieces take
// their group from here: a data-parallel strategy its data_parallel() group, a tensor-parallel layer
// comm({MeshDim::tp}), a pipeline schedule comm({MeshDim::pp}).
//
//   MeshComms comms(device_mesh(config), world);   // strategies/catalog.hpp device_mesh
//   Comm* dp = comms.data_parallel();              // the world's communicator while every rank is data parallel
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lab/mesh.hpp"
#include "lab/world.hpp"

namespace dtlab {

class MeshComms {
 public:
  // Collective. Throws MeshError when the mesh's world size is not the world's.
  MeshComms(const DeviceMesh& mesh, World& world);

  const DeviceMesh& mesh() const { return mesh_; }
  World& world() const { return world_; }
  int rank() const { return world_.rank(); }

  // The communicator over this rank's group along `dims` (one dimension, or several flattened in mesh order).
  // REQUIRES `dims` is one of built_dim_sets(); anything else throws std::invalid_argument naming it. In a
  // single-process world it throws as World::comm() does (there is no communicator).
  Comm& comm(const std::vector<MeshDim>& dims);
  // The data-parallel group (dp_replicate x dp_shard): the ranks a data-parallel strategy averages gradients over.
  Comm& data_parallel() { return comm(kDataParallelDims); }
  // This rank's index in its group along `dims`, and the group's size (both without a communicator).
  int index_in(const std::vector<MeshDim>& dims) const;
  int size_of(const std::vector<MeshDim>& dims) const;

  // The dimension sets MeshComms builds, in the order every rank builds them: each dimension, then dp flattened.
  static std::vector<std::vector<MeshDim>> built_dim_sets();
  // "dp_shard", "dp" (dp_replicate x dp_shard flattened), "tp": the split's name for `dims`.
  static std::string group_name(const std::vector<MeshDim>& dims);

 private:
  struct Group {
    int size = 1;
    bool is_world = false;
    std::shared_ptr<Comm> owned;          // a split; null for the world's (and a group of one not asked for yet)
    std::vector<std::vector<int>> ranks;  // every group along the dimensions (World::split's form)
  };
  const Group& group(const std::vector<MeshDim>& dims) const;
  Group& group(const std::vector<MeshDim>& dims);
  DeviceMesh mesh_;
  World& world_;
  std::map<std::string, Group> groups_;
};

}  // namespace dtlab
