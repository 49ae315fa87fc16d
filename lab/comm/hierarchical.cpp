// hierarchical.cpp: the two-level all-reduce (see hierarchical.hpp).
#include "lab/comm/hierarchical.hpp"

#include <algorithm>
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
  const int64_t piece_numel = std::max<int64_t>(1, kPieceBytes / static_cast<int64_t>(tensor.element_size()));
  const int k = ranks_per_node_;
  // Per piece: reduce-scatter inside the node now, its chunk's all-reduce across nodes issued at once, so the next
  // piece's reduce-scatter overlaps this piece's inter-node transfer.
  struct Piece {
    at::Tensor whole, shard;
    CommHandle across;
  };
  std::vector<Piece> pieces;
  for (int64_t offset = 0; offset < tensor.numel(); offset += piece_numel) {
    Piece piece;
    piece.whole = tensor.narrow(0, offset, std::min(piece_numel, tensor.numel() - offset));
    const auto [begin, end] = Comm::chunk_bounds(piece.whole.numel(), k)[static_cast<size_t>(intra_->rank())];
    piece.shard = at::empty({end - begin}, tensor.options());
    if (k > 1) {
      intra_->reduce_scatter(piece.shard, piece.whole, CommAlgorithm::ring, tag + ".intra").wait();
    } else {
      piece.shard.copy_(piece.whole);
    }
    piece.across = inter_->all_reduce(piece.shard, tag + ".inter");
    pieces.push_back(std::move(piece));
  }
  // On wait: per piece, its all-gather inside the node while the later pieces' all-reduces are still in flight.
  Comm* intra = intra_.get();
  return CommHandle::deferred([pieces = std::move(pieces), intra, k, tag]() mutable {
    for (Piece& piece : pieces) {
      piece.across.wait();
      if (k > 1) {
        intra->all_gather(piece.whole, piece.shard, CommAlgorithm::ring, tag + ".intra").wait();
      } else {
        piece.whole.copy_(piece.shard);
      }
    }
  });
}

}  // namespace dtlab
