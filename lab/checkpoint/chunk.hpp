// chunk.hpp: N-D chunks of a checkpointed tensor, torch-free (docs/checkpointing.md, "Pieces and chunks").
//
// A piece of a tensor is an element range [begin, begin + numel) of the row-major flattening of one chunk: the box
// of the whole tensor at `offsets` with extent `shape`. The whole tensor is the chunk of offsets 0 and the tensor's
// shape, so the 1-D pieces of a data-parallel shard are the special case, and a tensor-parallel slice (a row-parallel
// weight's columns r*n/t .. (r+1)*n/t) is one chunk, which an FSDP shard of that slice cuts into ranges again.
//
// A checkpoint is complete when its chunks tile the tensor (inside it, disjoint, their volumes summing to its size)
// and each chunk's ranges tile the chunk; check_tiling says which rule a set of pieces breaks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtlab::checkpoint {

struct Chunk {
  std::vector<int64_t> offsets;  // per axis, where the box starts in the whole tensor
  std::vector<int64_t> shape;    // per axis, its extent

  static Chunk whole(const std::vector<int64_t>& tensor_shape);
  bool is_whole(const std::vector<int64_t>& tensor_shape) const;
  int64_t numel() const;
  std::string text() const;  // "[0:8, 4:8]": per axis, the half-open range of the whole tensor's indices it covers
  bool operator==(const Chunk& other) const { return offsets == other.offsets && shape == other.shape; }
  bool operator!=(const Chunk& other) const { return !(*this == other); }
  bool operator<(const Chunk& other) const {
    return offsets != other.offsets ? offsets < other.offsets : shape < other.shape;
  }
};

// The box both chunks cover, or nullopt when they do not meet.
std::optional<Chunk> intersect(const Chunk& a, const Chunk& b);

// Why `chunk` cannot be a chunk of a tensor of `tensor_shape` (another number of axes, a negative extent, a box
// reaching outside the tensor), or "" when it can.
std::string chunk_problem(const Chunk& chunk, const std::vector<int64_t>& tensor_shape);

// The range of a chunk a piece holds, for the tiling check.
struct ChunkRange {
  Chunk chunk;
  int64_t begin = 0, numel = 0;
};
// "" when `pieces` cover a tensor of `tensor_shape` exactly once (the chunks tile the tensor, each chunk's ranges
// tile the chunk), else what is wrong, naming the chunk and the elements ("elements 0..4 of chunk [0:2, 4:8] are in
// no rank file").
std::string tiling_problem(std::vector<ChunkRange> pieces, const std::vector<int64_t>& tensor_shape);

// Copies `numel` elements of `element_size` bytes from `source` (elements [begin, begin + numel) of `chunk`'s
// row-major flattening) to their places in `whole`, the row-major bytes of the whole tensor of `tensor_shape`.
// REQUIRES: chunk_problem(chunk, tensor_shape) is "" and the range lies inside the chunk.
void scatter_into_whole(const char* source, int64_t begin, int64_t numel, const Chunk& chunk,
                        const std::vector<int64_t>& tensor_shape, size_t element_size, char* whole);

}  // namespace dtlab::checkpoint
