// model_shape.cpp: GPT shape presets and the parameter / FLOP counts that follow from a shape alone.
//
// The architecture counted here is the one lab/model.cpp builds (tests/unit/model_test.cpp compares them):
//   token embedding [V, d]
//   per block: attn_norm [d]; wq [n_heads*hd, d]; wk, wv [n_kv_heads*hd, d]; wo [d, n_heads*hd];
//              mlp_norm [d]; w_gate, w_up [ffn, d]; w_down [d, ffn]        (hd = d / n_heads, no biases)
//   final_norm [d]; lm_head [V, d] unless tie_embeddings (then the embedding matrix is reused).
#include "lab/model_shape.hpp"

#include <algorithm>  // defines: std::find_if
#include <array>

namespace dtlab {
namespace {

// One named shape. `trainable` is false for shapes meant only for prediction (`dtlab predict`):
// they are far too large to train on the CPU this lab runs on.
struct ModelPreset {
  const char* name;
  int64_t d_model, n_layers, n_heads, n_kv_heads, ffn_hidden, vocab_size, seq_len;
  bool tie_embeddings, trainable;
};

// clang-format off
constexpr std::array kPresets = {
  //           name     d_model n_layers n_heads n_kv  ffn     vocab   seq_len tie    trainable
  ModelPreset{"tiny",     64,    2,       4,      2,    172,    256,    64,     false, true},
  ModelPreset{"small",    256,   6,       8,      4,    768,    256,    256,    false, true},
  ModelPreset{"medium",   512,   16,      8,      4,    1536,   256,    512,    false, true},
  ModelPreset{"125m",     768,   12,      12,     12,   2048,   50304,  2048,   true,  false},
  ModelPreset{"1b",       2048,  16,      32,     8,    8192,   128256, 2048,   true,  false},
  ModelPreset{"7b",       4096,  32,      32,     32,   11008,  32000,  4096,   false, false},
};
// clang-format on

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const ModelPreset& p : kPresets) names.emplace_back(p.name);
  return names;
}

void apply_model_preset(const std::string& name, ModelConfig& m) {
  const auto* preset =
      std::find_if(kPresets.begin(), kPresets.end(), [&](const ModelPreset& p) { return name == p.name; });
  if (preset == kPresets.end()) {
    std::string known;
    for (const std::string& n : model_preset_names()) known += (known.empty() ? "" : " | ") + n;
    throw ConfigError("config: model.preset=" + name + " is not a known preset; choose one of " + known);
  }
  m.preset = preset->name;
  m.d_model = preset->d_model;
  m.n_layers = preset->n_layers;
  m.n_heads = preset->n_heads;
  m.n_kv_heads = preset->n_kv_heads;
  m.ffn_hidden = preset->ffn_hidden;
  m.vocab_size = preset->vocab_size;
  m.seq_len = preset->seq_len;
  m.tie_embeddings = preset->tie_embeddings;
  m.trainable = preset->trainable;
}

// REQUIRES: a valid shape (n_heads divides d_model); validate() guarantees it for loaded configs.
ModelCounts model_counts(const ModelConfig& m) {
  const int64_t d = m.d_model;
  const int64_t head_dim = d / m.n_heads;
  const int64_t q_width = m.n_heads * head_dim;      // == d
  const int64_t kv_width = m.n_kv_heads * head_dim;  // < d under grouped-query attention

  const int64_t norms_per_block = 2 * d;                         // attn_norm, mlp_norm
  const int64_t attention = 2 * q_width * d + 2 * kv_width * d;  // wq, wo + wk, wv
  const int64_t mlp = 3 * m.ffn_hidden * d;                      // w_gate, w_up, w_down

  ModelCounts c;
  c.params_per_block = norms_per_block + attention + mlp;
  c.embedding_params = m.vocab_size * d;
  const int64_t head_params = m.tie_embeddings ? 0 : m.vocab_size * d;
  const int64_t final_norm = d;
  c.params = c.embedding_params + m.n_layers * c.params_per_block + final_norm + head_params;
  c.non_embedding_params = c.params - c.embedding_params;

  // Matmul parameters: the embedding lookup is a gather, not a matmul, so an untied embedding is left
  // out; a tied matrix is still used once as the lm_head matmul, so it stays in.
  const int64_t matmul_params = m.tie_embeddings ? c.params : c.params - c.embedding_params;
  // 6 FLOPs per matmul parameter per token (2 forward + 4 backward) plus attention scores and
  // weighted sum: 12 * L * d * s (PaLM appendix B).
  c.flops_per_token = 6.0 * static_cast<double>(matmul_params) +
                      12.0 * static_cast<double>(m.n_layers) * static_cast<double>(d) * static_cast<double>(m.seq_len);
  return c;
}

}  // namespace dtlab
