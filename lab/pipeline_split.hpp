// pipeline_split.hpp: which model units each pipeline virtual stage runs (torch-free).
//
// Model units: 0 = the embedding, 1..L = the blocks, L + 1 = the final norm and head (lab/model.hpp). The K = P·v
// virtual stages of a pipeline take consecutive blocks; the embedding goes with the first and the head with the
// last. Balanced (the default) gives each virtual stage floor(L / K) blocks and the first L % K one more. A split
// names the first block (0-based) of each virtual stage after the first: "3,6" over 8 blocks and 3 stages is
// blocks 0-2 | 3-5 | 6-7. Virtual stage k lives on rank k % P as its chunk k / P (lab/pipeline_schedule.hpp).
//
//   const auto units = pipeline_stage_units(/*n_layers=*/8, /*virtual_stages_total=*/4, "");
//   units[0] == {0, 1, 2};   units[3] == {7, 8, 9}
#pragma once

#include <string>
#include <vector>

namespace dtlab {

// The model units of each of `virtual_stages_total` stages. Throws std::invalid_argument naming the rule when the
// split does not parse, is not increasing, leaves a stage without a block, or names a block past the last.
std::vector<std::vector<int>> pipeline_stage_units(int n_layers, int virtual_stages_total, const std::string& split);

// Blocks of each virtual stage (the counts the split gives), e.g. "3,3,2".
std::string describe_pipeline_split(const std::vector<std::vector<int>>& units, int n_layers);

}  // namespace dtlab
