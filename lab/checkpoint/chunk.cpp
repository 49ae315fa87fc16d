// chunk.cpp: N-D chunks of a checkpointed tensor (see chunk.hpp).
#include "lab/checkpoint/chunk.hpp"

#include <algorithm>
#include <cstring>
#include <map>

namespace dtlab::checkpoint {

Chunk Chunk::whole(const std::vector<int64_t>& tensor_shape) {
  return {std::vector<int64_t>(tensor_shape.size(), 0), tensor_shape};
}

bool Chunk::is_whole(const std::vector<int64_t>& tensor_shape) const { return *this == whole(tensor_shape); }

int64_t Chunk::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Chunk::text() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(offsets[i]) + ":" + std::to_string(offsets[i] + shape[i]);
  return s + "]";
}

std::optional<Chunk> intersect(const Chunk& a, const Chunk& b) {
  if (a.shape.size() != b.shape.size()) return std::nullopt;
  Chunk out;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    const int64_t lo = std::max(a.offsets[i], b.offsets[i]);
    const int64_t hi = std::min(a.offsets[i] + a.shape[i], b.offsets[i] + b.shape[i]);
    if (lo >= hi) return std::nullopt;
    out.offsets.push_back(lo);
    out.shape.push_back(hi - lo);
  }
  return out;
}

std::string chunk_problem(const Chunk& chunk, const std::vector<int64_t>& tensor_shape) {
  if (chunk.offsets.size() != tensor_shape.size() || chunk.shape.size() != tensor_shape.size())
    return "chunk " + chunk.text() + " has " + std::to_string(chunk.shape.size()) + " axes, the tensor " +
           std::to_string(tensor_shape.size());
  for (size_t i = 0; i < tensor_shape.size(); ++i)
    if (chunk.offsets[i] < 0 || chunk.shape[i] < 0 || chunk.offsets[i] + chunk.shape[i] > tensor_shape[i])
      return "chunk " + chunk.text() + " reaches outside the tensor along axis " + std::to_string(i) + " (size " +
             std::to_string(tensor_shape[i]) + ")";
  return "";
}

std::string tiling_problem(std::vector<ChunkRange> pieces, const std::vector<int64_t>& tensor_shape) {
  std::map<Chunk, std::vector<ChunkRange>> by_chunk;
  for (ChunkRange& p : pieces) {
    if (std::string problem = chunk_problem(p.chunk, tensor_shape); !problem.empty()) return problem;
    by_chunk[p.chunk].push_back(std::move(p));
  }
  int64_t volume = 0;
  for (auto& [chunk, ranges] : by_chunk) {
    std::sort(ranges.begin(), ranges.end(), [](const ChunkRange& a, const ChunkRange& b) { return a.begin < b.begin; });
    int64_t covered = 0;
    const std::string where = by_chunk.size() == 1 && chunk.is_whole(tensor_shape) ? "" : " of chunk " + chunk.text();
    for (const ChunkRange& r : ranges) {
      if (r.begin > covered)
        return "elements " + std::to_string(covered) + ".." + std::to_string(r.begin) + where + " are in no rank file";
      if (r.begin < covered)
        return "elements " + std::to_string(r.begin) + ".." + std::to_string(covered) + where + " overlap";
      covered += r.numel;
    }
    if (covered != chunk.numel())
      return "elements " + std::to_string(chunk.numel() > covered ? covered : chunk.numel()) + ".." +
             std::to_string(std::max(covered, chunk.numel())) + where +
             (covered < chunk.numel() ? " are in no rank file" : " lie outside it");
    volume += chunk.numel();
  }
  for (auto a = by_chunk.begin(); a != by_chunk.end(); ++a)
    for (auto b = std::next(a); b != by_chunk.end(); ++b)
      if (intersect(a->first, b->first)) return "chunks " + a->first.text() + " and " + b->first.text() + " overlap";
  int64_t total = 1;
  for (int64_t d : tensor_shape) total *= d;
  if (volume != total)
    return "its chunks cover " + std::to_string(volume) + " of " + std::to_string(total) + " elements";
  return "";
}

void scatter_into_whole(const char* source, int64_t begin, int64_t numel, const Chunk& chunk,
                        const std::vector<int64_t>& tensor_shape, size_t element_size, char* whole) {
  const size_t axes = tensor_shape.size();
  if (axes == 0) {  // a scalar: its one element
    std::memcpy(whole, source, element_size * static_cast<size_t>(numel));
    return;
  }
  std::vector<int64_t> index(axes);
  for (int64_t k = begin, end = begin + numel; k < end;) {
    // k's coordinates inside the chunk, then a run along the last axis copied at once.
    int64_t rest = k;
    for (size_t d = axes; d-- > 0;) {
      index[d] = rest % chunk.shape[d];
      rest /= chunk.shape[d];
    }
    const int64_t run = std::min(chunk.shape[axes - 1] - index[axes - 1], end - k);
    int64_t at = 0;
    for (size_t d = 0; d < axes; ++d) at = at * tensor_shape[d] + chunk.offsets[d] + index[d];
    std::memcpy(whole + static_cast<size_t>(at) * element_size, source + static_cast<size_t>(k - begin) * element_size,
                static_cast<size_t>(run) * element_size);
    k += run;
  }
}

}  // namespace dtlab::checkpoint
