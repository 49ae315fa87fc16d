// cost_plan.cpp: shared pieces of the cost plans — parameter shapes from the model config, optimizer
// state sizes (the dispatch by strategy id is the catalogue's: strategies/catalog.cpp).
#include "strategies/cost_plan.hpp"

#include <stdexcept>

namespace dtlab {

int64_t CostPlan::step_bytes() const {
  int64_t total = 0;
  for (const auto& c : collectives)
    if (c.phase != "setup") total += c.bytes * c.count;
  return total;
}

std::vector<ParamShape> param_shapes(const ModelConfig& m) {
  const int64_t d = m.d_model, hd = m.d_model / m.n_heads;
  std::vector<ParamShape> out;
  out.push_back({"tok_embedding", m.vocab_size * d, true});
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string b = "block." + std::to_string(l) + ".";
    out.push_back({b + "attn_norm", d, true});
    out.push_back({b + "wq", m.n_heads * hd * d, false});
    out.push_back({b + "wk", m.n_kv_heads * hd * d, false});
    out.push_back({b + "wv", m.n_kv_heads * hd * d, false});
    out.push_back({b + "wo", d * m.n_heads * hd, false});
    out.push_back({b + "mlp_norm", d, true});
    out.push_back({b + "w_gate", m.ffn_hidden * d, false});
    out.push_back({b + "w_up", m.ffn_hidden * d, false});
    out.push_back({b + "w_down", d * m.ffn_hidden, false});
  }
  out.push_back({"final_norm", d, true});
  if (!m.tie_embeddings) out.push_back({"lm_head", m.vocab_size * d, false});
  return out;
}

int64_t optimizer_state_bytes_per_element(const TrainConfig& train, int64_t element_bytes) {
  if (train.optimizer == "adamw") return 2 * element_bytes;
  if (train.optimizer == "sgd") return train.momentum != 0.0 ? element_bytes : 0;
  throw std::invalid_argument("train.optimizer='" + train.optimizer + "' has no cost plan");
}

}  // namespace dtlab
