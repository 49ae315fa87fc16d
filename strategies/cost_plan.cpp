// cost_plan.cpp: shared pieces of the cost plans — parameter shapes from the model config, optimizer
// state sizes (the dispatch by strategy id is the catalogue's: strategies/catalog.cpp).
#include "strategies/cost_plan.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "lab/pipeline_split.hpp"

namespace dtlab {

int64_t CostPlan::step_bytes() const {
  int64_t total = 0;
  for (const auto& c : collectives)
    if (c.phase != "setup") total += c.bytes * c.count;
  return total;
}

std::vector<ParamShape> param_shapes(const ModelConfig& m, int64_t tp) {
  if (tp < 1) throw std::invalid_argument("param_shapes: tp=" + std::to_string(tp) + " < 1");
  const int64_t d = m.d_model, hd = m.d_model / m.n_heads;
  const std::string by = tp > 1 ? "tp" : "";
  std::vector<ParamShape> out;
  // Split tensors (embedding and head by vocabulary rows, projections by heads or hidden units) hold 1/tp each.
  const auto split = [&](std::string name, int64_t numel, bool norm_or_embedding) {
    out.push_back({std::move(name), numel / tp, norm_or_embedding, by});
  };
  const auto whole = [&](std::string name, int64_t numel) { out.push_back({std::move(name), numel, true}); };
  split("tok_embedding", m.vocab_size * d, true);
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string b = "block." + std::to_string(l) + ".";
    whole(b + "attn_norm", d);
    split(b + "wq", m.n_heads * hd * d, false);
    split(b + "wk", m.n_kv_heads * hd * d, false);
    split(b + "wv", m.n_kv_heads * hd * d, false);
    split(b + "wo", d * m.n_heads * hd, false);
    whole(b + "mlp_norm", d);
    split(b + "w_gate", m.ffn_hidden * d, false);
    split(b + "w_up", m.ffn_hidden * d, false);
    split(b + "w_down", d * m.ffn_hidden, false);
  }
  whole("final_norm", d);
  if (!m.tie_embeddings) split("lm_head", m.vocab_size * d, false);
  return out;
}

std::vector<std::vector<int>> chunks_on_rank(const Config& config, int rank) {
  const int L = static_cast<int>(config.model.n_layers), P = static_cast<int>(config.parallel.pp);
  if (P <= 1) {
    std::vector<int> all;
    for (int m = 0; m <= L + 1; ++m) all.push_back(m);
    return {all};
  }
  const int v = static_cast<int>(config.parallel.pp_virtual_stages);
  const int pp_rank = static_cast<int>(rank / (config.world_size / P));  // pp outermost: blocks of world / P ranks
  const auto stages = pipeline_stage_units(L, P * v, config.parallel.pp_split);
  std::vector<std::vector<int>> chunks;
  for (int c = 0; c < v; ++c) chunks.push_back(stages[static_cast<size_t>(c * P + pp_rank)]);
  return chunks;
}

std::vector<int> units_on_rank(const Config& config, int rank) {
  std::vector<int> units;
  for (const std::vector<int>& chunk : chunks_on_rank(config, rank))
    units.insert(units.end(), chunk.begin(), chunk.end());
  return units;
}

std::vector<ParamShape> param_shapes(const Config& config, int rank) {
  std::vector<ParamShape> all = param_shapes(config.model, config.parallel.tp);
  if (config.parallel.pp <= 1) return all;
  const int L = static_cast<int>(config.model.n_layers);
  const std::vector<int> units = units_on_rank(config, rank);
  const auto unit_of = [L](const std::string& name) {
    if (name == "tok_embedding") return 0;
    if (name.rfind("block.", 0) == 0) return std::stoi(name.substr(6)) + 1;
    return L + 1;  // final_norm, lm_head
  };
  std::vector<ParamShape> held;
  for (ParamShape& p : all)
    if (std::find(units.begin(), units.end(), unit_of(p.name)) != units.end()) held.push_back(std::move(p));
  return held;
}

DataParallelGroup data_parallel_group(const Config& config) {
  const int64_t model_parallel = config.parallel.pp * config.parallel.cp * config.parallel.tp;
  if (model_parallel < 1 || config.world_size % model_parallel != 0)
    throw std::invalid_argument(
        "world size " + std::to_string(config.world_size) +
        " is not a multiple of parallel.pp * parallel.cp * parallel.tp = " + std::to_string(model_parallel));
  const bool tp_outside = config.parallel.tp_placement == "inter_node";
  return {static_cast<int>(config.world_size / model_parallel),
          static_cast<int>(config.parallel.cp * (tp_outside ? 1 : config.parallel.tp))};
}

int tensor_parallel_stride(const Config& config) {
  if (config.parallel.tp_placement != "inter_node") return 1;
  return data_parallel_group(config).size * static_cast<int>(config.parallel.cp);
}

int64_t optimizer_state_bytes_per_element(const TrainConfig& train, int64_t element_bytes) {
  if (train.optimizer == "adamw") return 2 * element_bytes;
  if (train.optimizer == "sgd") return train.momentum != 0.0 ? element_bytes : 0;
  throw std::invalid_argument("train.optimizer='" + train.optimizer + "' has no cost plan");
}

}  // namespace dtlab
