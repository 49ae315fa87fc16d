// mesh.hpp: the device mesh — the job's ranks as a grid of named parallel dimensions (torch-free).
//
// Dimensions, outermost first: pp × dp_replicate × dp_shard × cp × tp. Ranks are numbered row-major with tp
// innermost, so the inner dimensions' groups are runs of consecutive ranks and land inside a node (a node holds
// consecutive ranks: LOCAL_RANK = rank % ranks_per_node). With `tp_outside_data_parallel` (parallel.tp_placement=
// inter_node) the rank order is pp × tp × dp_replicate × dp_shard × cp instead: the data-parallel groups are the
// consecutive runs and each tp group spans nodes, to measure what crossing them costs. Expert parallelism (ep) owns no
// ranks of its own: it borrows them from dp_shard × cp × tp ("folding", as torchtitan and Megatron-Core do), so ep must
// divide that product. The data-parallel ranks (those that see different data) are dp_replicate × dp_shard.
//
//   DeviceMesh mesh(ParallelDims{.dp_shard = 2, .tp = 2}, /*world_size=*/4);
//   mesh.groups({MeshDim::tp});              // {{0, 1}, {2, 3}}
//   mesh.group_of(3, {MeshDim::dp_shard});   // {1, 3}
//   mesh.describe();                         // "pp 1 x dp_replicate 1 x dp_shard 2 x cp 1 x tp 2 (ep 1)"
//
// The runtime builds one communicator per dimension group from groups() (lab/dist), the cost models tag each
// collective with the dimension it runs over, and result.json records to_json().
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dtlab {

struct MeshError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The mesh's dimensions, outermost first. Their order is the rank order (tp varies fastest).
enum class MeshDim { pp, dp_replicate, dp_shard, cp, tp };
inline constexpr int kMeshDims = 5;
inline constexpr std::array<MeshDim, kMeshDims> kAllMeshDims = {MeshDim::pp, MeshDim::dp_replicate, MeshDim::dp_shard,
                                                                MeshDim::cp, MeshDim::tp};
// The data-parallel dimensions, flattened: the group a data-parallel strategy reduces gradients over.
inline const std::vector<MeshDim> kDataParallelDims = {MeshDim::dp_replicate, MeshDim::dp_shard};

const char* mesh_dim_name(MeshDim dim);                   // "pp", "dp_replicate", ...
std::optional<MeshDim> parse_mesh_dim(std::string_view);  // nullopt for an unknown name

// Degrees of parallelism; each >= 1. ep is borrowed (see above) and is not a factor of the world size.
struct ParallelDims {
  int64_t pp = 1;
  int64_t dp_replicate = 1;
  int64_t dp_shard = 1;
  int64_t cp = 1;
  int64_t tp = 1;
  int64_t ep = 1;
  bool tp_outside_data_parallel = false;  // rank order pp, tp, dp_replicate, dp_shard, cp (see above)

  int64_t size(MeshDim dim) const;
  int64_t product() const { return pp * dp_replicate * dp_shard * cp * tp; }
  int64_t data_parallel() const { return dp_replicate * dp_shard; }
  // The ranks one model replica spans: pp × cp × tp (the world over the data-parallel degree).
  int64_t model_parallel() const { return pp * cp * tp; }
};

using MeshCoords = std::array<int64_t, kMeshDims>;  // indexed by static_cast<int>(MeshDim)

class DeviceMesh {
 public:
  // REQUIRES nothing: throws MeshError naming each degree and the rule, e.g.
  // "pp(1) * dp_replicate(1) * dp_shard(2) * cp(1) * tp(2) = 4 != world_size(6)".
  DeviceMesh(const ParallelDims& dims, int64_t world_size);

  const ParallelDims& dims() const { return dims_; }
  int64_t world_size() const { return world_size_; }
  int64_t size(MeshDim dim) const { return dims_.size(dim); }

  MeshCoords coords(int64_t rank) const;  // throws MeshError for a rank outside [0, world_size)
  int64_t coord(int64_t rank, MeshDim dim) const { return coords(rank)[static_cast<size_t>(dim)]; }
  int64_t rank_at(const MeshCoords& coords) const;

  // The groups along `dims` (one dimension, or several flattened in mesh order): every rank in exactly one group;
  // the groups ordered by the other dimensions' coordinates, the ranks in a group by theirs along `dims`. The form
  // World::split takes. An empty `dims` gives one group per rank.
  std::vector<std::vector<int>> groups(const std::vector<MeshDim>& dims) const;
  // The group along `dims` that holds `rank`, and `rank`'s index in it.
  std::vector<int> group_of(int64_t rank, const std::vector<MeshDim>& dims) const;
  int64_t index_in_group(int64_t rank, const std::vector<MeshDim>& dims) const;

  // Expert-parallel groups: consecutive runs of ep ranks inside each dp_shard × cp × tp group.
  std::vector<std::vector<int>> expert_groups() const;

  // True when a group along `dim` holds ranks of more than one node of `ranks_per_node` consecutive ranks
  // (0 = one node). A dimension of size 1 never spans nodes.
  bool spans_nodes(MeshDim dim, int64_t ranks_per_node) const;

  std::string describe() const;    // "pp 1 x dp_replicate 2 x dp_shard 2 x cp 1 x tp 1 (ep 1)", "... (tp across dp)"
  nlohmann::json to_json() const;  // {"pp":1,...,"ep":1}

 private:
  int64_t stride(MeshDim dim) const;           // ranks between neighbours along `dim`
  std::array<MeshDim, kMeshDims> rank_order_;  // outermost first: kAllMeshDims, or tp moved outside dp
  ParallelDims dims_;
  int64_t world_size_;
};

}  // namespace dtlab
