// pipeline_split.cpp: cutting the blocks into pipeline stages (see pipeline_split.hpp).
#include "lab/pipeline_split.hpp"

#include <sstream>
#include <stdexcept>

namespace dtlab {
namespace {

// The first block of each stage after the first, from "3,6".
std::vector<int> parse_split(const std::string& split) {
  std::vector<int> firsts;
  std::stringstream in(split);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int value = -1;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw std::invalid_argument("parallel.pp_split=" + split + ": '" + item +
                                  "' is not a block index; write the first block of each stage after the first, "
                                  "comma-separated, e.g. 3,6");
    firsts.push_back(value);
  }
  return firsts;
}

}  // namespace

std::vector<std::vector<int>> pipeline_stage_units(int n_layers, int virtual_stages_total, const std::string& split) {
  const int K = virtual_stages_total, L = n_layers;
  if (K < 1) throw std::invalid_argument("pipeline split: " + std::to_string(K) + " virtual stages; needs >= 1");
  if (L < K)
    throw std::invalid_argument("model.n_layers=" + std::to_string(L) + " < " + std::to_string(K) +
                                " pipeline virtual stages (parallel.pp * parallel.pp_virtual_stages): every stage "
                                "needs at least one block");
  std::vector<int> first(static_cast<size_t>(K), 0);  // first block of each stage
  if (split.empty()) {
    for (int k = 1; k < K; ++k)
      first[static_cast<size_t>(k)] = first[static_cast<size_t>(k - 1)] + L / K + (k - 1 < L % K ? 1 : 0);
  } else {
    const std::vector<int> given = parse_split(split);
    if (static_cast<int>(given.size()) != K - 1)
      throw std::invalid_argument("parallel.pp_split=" + split + " names " + std::to_string(given.size()) +
                                  " boundaries; " + std::to_string(K) + " virtual stages need " +
                                  std::to_string(K - 1) + " (the first block of each stage after the first)");
    for (int k = 1; k < K; ++k) {
      const int b = given[static_cast<size_t>(k - 1)];
      if (b <= first[static_cast<size_t>(k - 1)] || b >= L)
        throw std::invalid_argument("parallel.pp_split=" + split + ": boundary " + std::to_string(b) +
                                    " must be greater than the one before (or 0) and below model.n_layers=" +
                                    std::to_string(L) + ", so that every stage holds at least one block");
      first[static_cast<size_t>(k)] = b;
    }
  }
  std::vector<std::vector<int>> units(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    const int end = k + 1 < K ? first[static_cast<size_t>(k + 1)] : L;
    auto& u = units[static_cast<size_t>(k)];
    if (k == 0) u.push_back(0);
    for (int b = first[static_cast<size_t>(k)]; b < end; ++b) u.push_back(b + 1);
    if (k == K - 1) u.push_back(L + 1);
  }
  return units;
}

std::string describe_pipeline_split(const std::vector<std::vector<int>>& units, int n_layers) {
  std::string out;
  for (const auto& u : units) {
    int blocks = 0;
    for (int m : u) blocks += (m >= 1 && m <= n_layers) ? 1 : 0;
    if (!out.empty()) out += ',';
    out += std::to_string(blocks);
  }
  return out;
}

}  // namespace dtlab
