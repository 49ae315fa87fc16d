// model_shape.hpp: GPT shapes, presets and the analytic counts derived from them (torch-free).
//
// Parameter count and training FLOPs per token are computed here from the shape alone, and checked
// against the real LibTorch model in tests/unit/model_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/config.hpp"

namespace dtlab {

// Applies preset `name` to `m` (all shape keys). Throws ConfigError for an unknown preset.
void apply_model_preset(const std::string& name, ModelConfig& m);
std::vector<std::string> model_preset_names();

struct ModelCounts {
  int64_t params = 0;            // all trainable parameters (tied head counted once)
  int64_t embedding_params = 0;  // token embedding
  int64_t non_embedding_params = 0;
  int64_t params_per_block = 0;
  double flops_per_token = 0;  // training: 6*N + 12*L*h*s (PaLM appendix), N = non-embedding + head
};
ModelCounts model_counts(const ModelConfig& m);

}  // namespace dtlab
