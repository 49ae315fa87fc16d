// mesh_comms.cpp: one communicator per mesh dimension group (see mesh_comms.hpp).
#include "lab/dist/mesh_comms.hpp"

#include <stdexcept>

namespace dtlab {

std::vector<std::vector<MeshDim>> MeshComms::built_dim_sets() {
  std::vector<std::vector<MeshDim>> sets;
  for (MeshDim dim : kAllMeshDims) sets.push_back({dim});
  sets.push_back(kDataParallelDims);
  return sets;
}

std::string MeshComms::group_name(const std::vector<MeshDim>& dims) {
  if (dims == kDataParallelDims) return "dp";
  std::string name;
  for (MeshDim dim : dims) {
    if (!name.empty()) name += '_';
    name += mesh_dim_name(dim);
  }
  return name;
}

MeshComms::MeshComms(const DeviceMesh& mesh, World& world) : mesh_(mesh), world_(world) {
  if (mesh.world_size() != world.world_size())
    throw MeshError("mesh " + mesh.describe() + " is for " + std::to_string(mesh.world_size()) +
                    " ranks, the job has world_size=" + std::to_string(world.world_size()));
  for (const std::vector<MeshDim>& dims : built_dim_sets()) {
    Group g;
    g.ranks = mesh.groups(dims);
    g.size = static_cast<int>(g.ranks.front().size());
    g.is_world = g.size == world.world_size();
    // Every rank reaches this split in the same order (the sets and the mesh are the same on every rank).
    if (!g.is_world && g.size > 1) g.owned = world.split(group_name(dims), g.ranks);
    groups_[group_name(dims)] = std::move(g);
  }
}

MeshComms::Group& MeshComms::group(const std::vector<MeshDim>& dims) {
  return const_cast<Group&>(static_cast<const MeshComms&>(*this).group(dims));
}

const MeshComms::Group& MeshComms::group(const std::vector<MeshDim>& dims) const {
  const auto it = groups_.find(group_name(dims));
  if (it == groups_.end())
    throw std::invalid_argument("mesh communicators: no group along '" + group_name(dims) +
                                "' (built: each dimension, and dp = dp_replicate x dp_shard)");
  return it->second;
}

Comm& MeshComms::comm(const std::vector<MeshDim>& dims) {
  Group& g = group(dims);
  if (g.is_world) return world_.comm();
  if (!g.owned) g.owned = world_.split(group_name(dims), g.ranks);  // a group of one: no other rank takes part
  return *g.owned;
}

int MeshComms::index_in(const std::vector<MeshDim>& dims) const {
  group(dims);
  return static_cast<int>(mesh_.index_in_group(world_.rank(), dims));
}

int MeshComms::size_of(const std::vector<MeshDim>& dims) const { return group(dims).size; }

}  // namespace dtlab
