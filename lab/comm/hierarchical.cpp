// hierarchical.cpp: the two-level all-reduce (see hierarchical.hpp).
#include "lab/comm/hierarchical.hpp"

#include <stdexcept>
#include <vector>

#include "lab/world.hpp"

namespace dtlab {

HierarchicalComm::HierarchicalComm(World& world, int ranks_per_node) : ranks_per_node_(ranks_per_node) {
  const int world_size = world.world_size();
  if (ranks_per_node < 1 || world_size % ranks_per_node != 0)
    throw std::invalid_argument("hierarchical collectives: " + std::to_string(ranks_per_node) +
                                " ranks per node do not divide the world size " + std::to_string(world_size));
  nodes_ = world_size / ranks_per_node;
  std::vector<std::vector<int>> node_groups(static_cast<size_t>(nodes_));
  std::vector<std::vector<int>> cross_groups(static_cast<size_t>(ranks_per_node));
  for (int r = 0; r < world_size; ++r) {
    node_groups[static_cast<size_t>(r / ranks_per_node)].push_back(r);
    cross_groups[static_cast<size_t>(r % ranks_per_node)].push_back(r);
  }
  intra_ = world.split("node", node_groups);
  intra_->set_level("intra");
  inter_ = world.split("cross", cross_groups);
  inter_->set_level("inter");
}

CommHandle HierarchicalComm::all_reduce(at::Tensor& tensor, const std::string& tag) {
  if (tensor.dim() != 1 || !tensor.is_contiguous())
    throw std::invalid_argument("hierarchical all_reduce needs a 1-D contiguous tensor");
  const auto chunks = Comm::chunk_bounds(tensor.numel(), ranks_per_node_);
  const auto [begin, end] = chunks[static_cast<size_t>(intra_->rank())];
  at::Tensor shard = at::empty({end - begin}, tensor.options());
  if (ranks_per_node_ > 1) {
    intra_->reduce_scatter(shard, tensor, CommAlgorithm::ring, tag + ".intra").wait();
  } else {
    shard.copy_(tensor);
  }
  CommHandle across = inter_->all_reduce(shard, tag + ".inter");
  Comm* intra = intra_.get();
  const int k = ranks_per_node_;
  return CommHandle::deferred([across, intra, k, shard, tensor, tag]() mutable {
    across.wait();
    if (k > 1) {
      intra->all_gather(tensor, shard, CommAlgorithm::ring, tag + ".intra").wait();
    } else {
      tensor.copy_(shard);
    }
  });
}

}  // namespace dtlab
