// mesh.cpp: the device mesh's arithmetic — coordinates, groups, expert groups, node placement (see mesh.hpp).
#include "lab/mesh.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace dtlab {

namespace {

size_t index(MeshDim dim) { return static_cast<size_t>(dim); }

bool contains(const std::vector<MeshDim>& dims, MeshDim dim) {
  return std::find(dims.begin(), dims.end(), dim) != dims.end();
}

}  // namespace

const char* mesh_dim_name(MeshDim dim) {
  switch (dim) {
    case MeshDim::pp:
      return "pp";
    case MeshDim::dp_replicate:
      return "dp_replicate";
    case MeshDim::dp_shard:
      return "dp_shard";
    case MeshDim::cp:
      return "cp";
    case MeshDim::tp:
      return "tp";
  }
  return "?";
}

std::optional<MeshDim> parse_mesh_dim(std::string_view name) {
  for (const MeshDim dim : kAllMeshDims)
    if (name == mesh_dim_name(dim)) return dim;
  return std::nullopt;
}

int64_t ParallelDims::size(MeshDim dim) const {
  switch (dim) {
    case MeshDim::pp:
      return pp;
    case MeshDim::dp_replicate:
      return dp_replicate;
    case MeshDim::dp_shard:
      return dp_shard;
    case MeshDim::cp:
      return cp;
    case MeshDim::tp:
      return tp;
  }
  return 1;
}

DeviceMesh::DeviceMesh(const ParallelDims& dims, int64_t world_size)
    : rank_order_(dims.tp_outside_data_parallel
                      ? std::array<MeshDim, kMeshDims>{MeshDim::pp, MeshDim::tp, MeshDim::dp_replicate,
                                                       MeshDim::dp_shard, MeshDim::cp}
                      : kAllMeshDims),
      dims_(dims),
      world_size_(world_size) {
  for (const MeshDim dim : kAllMeshDims)
    if (dims.size(dim) < 1)
      throw MeshError(std::string("mesh: ") + mesh_dim_name(dim) + "=" + std::to_string(dims.size(dim)) +
                      " must be >= 1");
  if (dims.ep < 1) throw MeshError("mesh: ep=" + std::to_string(dims.ep) + " must be >= 1");
  std::string product;
  for (const MeshDim dim : kAllMeshDims)
    product +=
        (product.empty() ? "" : " * ") + std::string(mesh_dim_name(dim)) + "(" + std::to_string(dims.size(dim)) + ")";
  if (world_size < 1 || dims.product() != world_size)
    throw MeshError("mesh: " + product + " = " + std::to_string(dims.product()) + " != world_size(" +
                    std::to_string(world_size) + "); the degrees must multiply to the number of ranks");
  const int64_t borrowed = dims.dp_shard * dims.cp * dims.tp;
  if (borrowed % dims.ep != 0)
    throw MeshError("mesh: ep(" + std::to_string(dims.ep) + ") must divide dp_shard(" + std::to_string(dims.dp_shard) +
                    ") * cp(" + std::to_string(dims.cp) + ") * tp(" + std::to_string(dims.tp) +
                    ") = " + std::to_string(borrowed) + ": expert parallelism borrows its ranks from those dimensions");
}

int64_t DeviceMesh::stride(MeshDim dim) const {
  int64_t s = 1;
  for (size_t d = kMeshDims; d-- > 0 && rank_order_[d] != dim;) s *= dims_.size(rank_order_[d]);
  return s;
}

MeshCoords DeviceMesh::coords(int64_t rank) const {
  if (rank < 0 || rank >= world_size_)
    throw MeshError("mesh: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world_size_) + ")");
  MeshCoords c{};
  for (const MeshDim dim : kAllMeshDims) c[index(dim)] = (rank / stride(dim)) % size(dim);
  return c;
}

int64_t DeviceMesh::rank_at(const MeshCoords& c) const {
  int64_t rank = 0;
  for (const MeshDim dim : kAllMeshDims) {
    if (c[index(dim)] < 0 || c[index(dim)] >= size(dim))
      throw MeshError(std::string("mesh: coordinate ") + mesh_dim_name(dim) + "=" + std::to_string(c[index(dim)]) +
                      " is outside [0, " + std::to_string(size(dim)) + ")");
    rank += c[index(dim)] * stride(dim);
  }
  return rank;
}

std::vector<int> DeviceMesh::group_of(int64_t rank, const std::vector<MeshDim>& dims) const {
  // Walk every combination of coordinates along `dims` (in mesh order), the other coordinates held at rank's.
  std::vector<MeshCoords> points{coords(rank)};
  for (const MeshDim dim : kAllMeshDims) {
    if (!contains(dims, dim)) continue;
    std::vector<MeshCoords> next;
    for (const MeshCoords& p : points)
      for (int64_t i = 0; i < size(dim); ++i) {
        MeshCoords q = p;
        q[index(dim)] = i;
        next.push_back(q);
      }
    points = std::move(next);
  }
  std::vector<int> group;
  for (const MeshCoords& p : points) group.push_back(static_cast<int>(rank_at(p)));
  return group;
}

int64_t DeviceMesh::index_in_group(int64_t rank, const std::vector<MeshDim>& dims) const {
  const std::vector<int> group = group_of(rank, dims);
  return std::find(group.begin(), group.end(), static_cast<int>(rank)) - group.begin();
}

std::vector<std::vector<int>> DeviceMesh::groups(const std::vector<MeshDim>& dims) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> placed(static_cast<size_t>(world_size_), false);
  for (int64_t r = 0; r < world_size_; ++r) {
    if (placed[static_cast<size_t>(r)]) continue;
    out.push_back(group_of(r, dims));
    for (const int member : out.back()) placed[static_cast<size_t>(member)] = true;
  }
  return out;
}

std::vector<std::vector<int>> DeviceMesh::expert_groups() const {
  std::vector<std::vector<int>> out;
  for (const std::vector<int>& g : groups({MeshDim::dp_shard, MeshDim::cp, MeshDim::tp}))
    for (size_t start = 0; start < g.size(); start += static_cast<size_t>(dims_.ep))
      out.emplace_back(g.begin() + static_cast<std::ptrdiff_t>(start),
                       g.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(dims_.ep)));
  return out;
}

bool DeviceMesh::spans_nodes(MeshDim dim, int64_t ranks_per_node) const {
  if (size(dim) == 1 || ranks_per_node < 1 || ranks_per_node >= world_size_) return false;
  for (const std::vector<int>& g : groups({dim}))
    for (const int r : g)
      if (r / ranks_per_node != g.front() / ranks_per_node) return true;
  return false;
}

std::string DeviceMesh::describe() const {
  std::string text;
  for (const MeshDim dim : kAllMeshDims)
    text += (text.empty() ? "" : " x ") + std::string(mesh_dim_name(dim)) + " " + std::to_string(size(dim));
  return text + " (ep " + std::to_string(dims_.ep) + ")" + (dims_.tp_outside_data_parallel ? " (tp across dp)" : "");
}

nlohmann::json DeviceMesh::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const MeshDim dim : kAllMeshDims) j[mesh_dim_name(dim)] = size(dim);
  j["ep"] = dims_.ep;
  if (dims_.tp_outside_data_parallel) j["tp_placement"] = "inter_node";
  return j;
}

}  // namespace dtlab
