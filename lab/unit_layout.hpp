// unit_layout.hpp: how parallel.wrap groups the model into the sharded strategies' flat units — the one grouping
// the sharded engine (strategies/sharded/flat_unit.cpp), its cost plan (strategies/sharded_plan.cpp) and the
// step-time model (analysis/cost/step_model.cpp) share. Torch-free, header-only.
//
// Model units are numbered 0 = embedding, 1..n_layers = the blocks, n_layers + 1 = the head (final norm and output).
//   wrap_unit_groups("block", 4)   -> {0} {1} {2} {3} {4} {5}
//   wrap_unit_groups("every_2", 3) -> {0} {1,2} {3} {4}
//   wrap_unit_groups("model", 2)   -> {0,1,2,3}
// Under pipeline stages a rank holds only its chunks' units (lab/pipeline_split.hpp), and a flat unit never spans two
// chunks (one runs, then the other, with sends between):
//   held_unit_groups("every_2", 4, {{0, 1, 2}, {3, 4, 5}})  -> {0} {1,2} {3} {4} {5}
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace dtlab {

// Model unit m's name as GPT::units() gives it: "embedding", "block.<m-1>" or "head".
inline std::string model_unit_name(int m, int n_layers) {
  return m == 0 ? std::string("embedding") : m == n_layers + 1 ? std::string("head") : "block." + std::to_string(m - 1);
}

// The model units of each flat unit, in forward order. `wrap` is a validated parallel.wrap
// (block | every_2 | every_4 | model).
inline std::vector<std::vector<int>> wrap_unit_groups(const std::string& wrap, int n_layers) {
  std::vector<std::vector<int>> groups;
  if (wrap == "model") {
    groups.emplace_back();
    for (int m = 0; m <= n_layers + 1; ++m) groups.back().push_back(m);
    return groups;
  }
  const int per = wrap == "every_2" ? 2 : wrap == "every_4" ? 4 : 1;
  groups.push_back({0});
  for (int l = 0; l < n_layers; l += per) {
    groups.emplace_back();
    for (int k = l; k < std::min(n_layers, l + per); ++k) groups.back().push_back(k + 1);
  }
  groups.push_back({n_layers + 1});
  return groups;
}

// The flat units of a rank that runs the model units of `chunks` (a pipeline rank's chunks in model order; one chunk
// of every unit without stages): each wrap group cut at the chunks' edges, the pieces outside them dropped.
inline std::vector<std::vector<int>> held_unit_groups(const std::string& wrap, int n_layers,
                                                      const std::vector<std::vector<int>>& chunks) {
  std::vector<std::vector<int>> groups;
  for (const std::vector<int>& chunk : chunks)
    for (const std::vector<int>& group : wrap_unit_groups(wrap, n_layers)) {
      std::vector<int> piece;
      for (int m : group)
        if (std::find(chunk.begin(), chunk.end(), m) != chunk.end()) piece.push_back(m);
      if (!piece.empty()) groups.push_back(std::move(piece));
    }
  return groups;
}

// The index of the chunk (of `chunks`, a rank's chunks in model order) that holds model unit m; 0 when none does.
inline int chunk_holding(const std::vector<std::vector<int>>& chunks, int m) {
  for (size_t c = 0; c < chunks.size(); ++c)
    if (std::find(chunks[c].begin(), chunks[c].end(), m) != chunks[c].end()) return static_cast<int>(c);
  return 0;
}

}  // namespace dtlab
