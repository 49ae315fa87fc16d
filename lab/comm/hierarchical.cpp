// hierarchical.cpp: the two-level all-reduce, reduce-scatter and all-gather (see hierarchical.hpp).
#include "lab/comm/hierarchical.hpp"

#include <algorithm>
#include <exception>
#include <future>
#include <stdexcept>
#include <vector>

#include "lab/instrument/step_profiler.hpp"
#include "lab/memory.hpp"
#include "lab/world.hpp"

namespace dtlab {

HierarchicalComm::HierarchicalComm(World& world, int ranks_per_node, const std::string& prefix)
    : ranks_per_node_(ranks_per_node) {
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
  intra_ = world.split(prefix + "node", node_groups);
  intra_->set_level("intra");
  inter_ = world.split(prefix + "cross", cross_groups);
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

int HierarchicalComm::chunk_index() const { return intra_->rank() * nodes_ + inter_->rank(); }

void HierarchicalComm::check_chunked(const char* op, const at::Tensor& whole, const at::Tensor& chunk) const {
  const int64_t chunks = static_cast<int64_t>(nodes_) * ranks_per_node_;
  if (whole.dim() != 1 || chunk.dim() != 1 || !whole.is_contiguous() || !chunk.is_contiguous() ||
      whole.scalar_type() != chunk.scalar_type() || whole.numel() != chunks * chunk.numel())
    throw std::invalid_argument(std::string("hierarchical ") + op + ": needs 1-D contiguous tensors of one dtype, " +
                                "the whole buffer " + std::to_string(chunks) + " times the chunk (" +
                                std::to_string(nodes_) + " nodes x " + std::to_string(ranks_per_node_) +
                                " ranks); got " + std::to_string(whole.numel()) + " and " +
                                std::to_string(chunk.numel()) + " elements");
}

CommHandle HierarchicalComm::run_levels(std::unique_ptr<SerialThread>& thread, const char* op, const std::string& tag,
                                        std::function<void()> levels) {
  if (!thread) thread = std::make_unique<SerialThread>();
  auto done = std::make_shared<std::promise<void>>();
  std::shared_future<void> finished = done->get_future().share();
  thread->post([levels = std::move(levels), done] {
    at::NoGradGuard no_grad;                    // plain buffers; this thread has autograd's default mode
    MemoryScope scratch(MemoryCategory::comm);  // the block between the levels
    try {
      levels();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
  // A level's failure arrives as that level's Comm rethrew it (op, group and rank named).
  return CommHandle::deferred([finished, span = collective_span_name(op, tag)] {
    ScopedPhase blocked(Phase::comm_wait, span);
    finished.get();
  });
}

CommHandle HierarchicalComm::reduce_scatter(at::Tensor& output, at::Tensor& input, const std::string& tag) {
  check_chunked("reduce_scatter", input, output);
  const int64_t block = output.numel() * nodes_;  // M chunks: one local rank's share of the node
  Comm* intra = intra_.get();
  Comm* inter = inter_.get();
  const int k = ranks_per_node_, m = nodes_;
  return run_levels(scatter_thread_, "reduce_scatter", tag, [=]() mutable {
    at::Tensor node_sum = k > 1 ? at::empty({block}, input.options()) : input;
    if (k > 1) intra->reduce_scatter(node_sum, input, CommAlgorithm::ring, tag + ".intra").wait();
    if (m > 1) {
      inter->reduce_scatter(output, node_sum, CommAlgorithm::ring, tag + ".inter").wait();
    } else {
      output.copy_(node_sum);
    }
  });
}

CommHandle HierarchicalComm::all_gather(at::Tensor& output, at::Tensor& input, const std::string& tag) {
  check_chunked("all_gather", output, input);
  const int64_t block = input.numel() * nodes_;
  Comm* intra = intra_.get();
  Comm* inter = inter_.get();
  const int k = ranks_per_node_, m = nodes_;
  return run_levels(gather_thread_, "all_gather", tag, [=]() mutable {
    // With one rank per node the block is the whole buffer: gather across nodes straight into it.
    at::Tensor node_block = k > 1 ? at::empty({block}, input.options()) : output;
    if (m > 1) {
      inter->all_gather(node_block, input, CommAlgorithm::backend, tag + ".inter").wait();
    } else {
      node_block.copy_(input);
    }
    if (k > 1) intra->all_gather(output, node_block, CommAlgorithm::backend, tag + ".intra").wait();
  });
}

}  // namespace dtlab
