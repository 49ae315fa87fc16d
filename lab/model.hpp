// model.hpp: the GPT decoder dtlab trains under every strategy, on plain LibTorch tensors.
//
// token embedding -> n_layers x [pre-RMSNorm attention (RoPE, grouped-query heads, causal SDPA)
//                                + pre-RMSNorm SwiGLU MLP] -> final RMSNorm -> LM head (optionally tied)
//
// Parameters are ordinary leaf tensors (no nn::Module), grouped by unit (embedding, each block, final
// norm + head) so strategies can flatten, shard and swap a unit's tensors. The forward is split into
// the same units (embed, block, head) so a strategy can run code between them (gather, free, prefetch).
// Linear layers, the embedding, the head and the loss go through a ParallelLinear (lab/parallel_linear.hpp) that a
// model-parallel plan may replace; heads and hidden width are read from the weights' shapes, so a plan that keeps a
// slice of each weight needs no branch here. Shapes and counts: lab/model_shape.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "lab/config.hpp"
#include "lab/parallel_linear.hpp"

namespace dtlab {

// The weights of one transformer block. Linear weights are [out_features, in_features].
struct BlockParams {
  at::Tensor attn_norm;            // [d]
  at::Tensor wq;                   // [n_heads*hd, d]
  at::Tensor wk;                   // [n_kv_heads*hd, d]
  at::Tensor wv;                   // [n_kv_heads*hd, d]
  at::Tensor wo;                   // [d, n_heads*hd]
  at::Tensor mlp_norm;             // [d]
  at::Tensor w_gate;               // [ffn, d]
  at::Tensor w_up;                 // [ffn, d]
  at::Tensor w_down;               // [d, ffn]
  std::vector<at::Tensor*> all();  // in the order above
};

// A named parameter: `tensor` aliases the model's own tensor handle, so rebinding *tensor (e.g. to a
// view of a flat buffer) changes what the model computes with.
struct ParamRef {
  std::string name;
  at::Tensor* tensor;
  bool is_norm_or_embedding;  // AdamW weight decay excludes these unless configured otherwise
  // Counted in the global gradient norm on this rank: false where a model-parallel plan replicates the parameter
  // and another rank of the group counts it (lab/train/model_plan.hpp sum_over_model_parallel).
  bool counted_in_norm = true;
};

// One unit of the model as strategies see it: the embedding, each block, the final norm with the head.
struct ModelUnit {
  std::string name;  // "embedding", "block.3", "head"
  std::vector<ParamRef> params;
};

// Precomputed RoPE rotation tables for positions [0, seq_len).
struct RopeTables {
  at::Tensor cos;  // [seq_len, head_dim/2]
  at::Tensor sin;
};
RopeTables make_rope_tables(int64_t seq_len, int64_t head_dim, double theta);
// Rotates x [B, heads, S, hd] in (first half, second half) pairs: (a, b) -> (a cos - b sin, b cos + a sin).
at::Tensor apply_rope(const at::Tensor& x, const RopeTables& rope);

class GPT {
 public:
  // Deterministic init from `seed`: N(0, init_std) for matrices, output projections (wo, w_down)
  // scaled by 1/sqrt(2 * n_layers), norms = 1. Same seed -> bit-identical weights.
  GPT(const ModelConfig& config, int64_t seed);

  const ModelConfig& config() const { return config_; }

  // Whole forward: tokens int64 [B, S] -> logits [B, S, V].
  at::Tensor forward(const at::Tensor& tokens);
  // Unit forwards (what forward() composes).
  at::Tensor embed(const at::Tensor& tokens) const;
  at::Tensor block(int64_t index, const at::Tensor& x) const;
  at::Tensor head(const at::Tensor& x) const;  // final norm + LM head -> logits
  // Attention and MLP halves of a block (selective activation checkpointing recomputes one of them).
  at::Tensor block_attention(int64_t index, const at::Tensor& x) const;  // x + attn(norm(x))
  at::Tensor block_mlp(int64_t index, const at::Tensor& x) const;        // x + mlp(norm(x))

  // Sum of token cross-entropies over targets != kIgnoreIndex (fp32 accumulation), whole logits [.., V].
  static at::Tensor loss_sum(const at::Tensor& logits, const at::Tensor& targets);
  // The same through the installed ParallelLinear, from head()'s logits as this rank holds them.
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const {
    return parallel_->loss_sum(logits, targets);
  }

  // A model-parallel plan marks the parameters this rank holds as a replica another rank counts (ParamRef).
  void set_counted_in_norm(const std::string& name, bool counted);

  // How linear layers, embedding, head and loss run (a model-parallel plan installs its own; never null).
  const ParallelLinear& parallel_linear() const { return *parallel_; }
  void set_parallel_linear(std::shared_ptr<const ParallelLinear> parallel);

  // Every parameter this rank holds, in model order: embedding, blocks 0..L-1 (BlockParams order), final_norm,
  // lm_head. units(): the same by model unit (0 = embedding, 1..L = blocks, L + 1 = head), the held ones only.
  std::vector<ParamRef> parameters();
  std::vector<ModelUnit> units();
  // A pipeline stage's plan keeps only the model units its chunks run (lab/train/pipeline_plan.hpp): the others'
  // tensors are freed, and parameters(), units() and parameter_count() leave them out. Every unit is held until then.
  void keep_units(const std::vector<int>& units);
  bool holds_unit(int unit) const { return held_.empty() || held_[static_cast<size_t>(unit)]; }
  // Moves every parameter (still a leaf that requires grad) and the RoPE tables to `device`. The weights are made
  // on the host from the seed first, so a run on a GPU starts from the very weights of the CPU reference.
  void to(at::Device device);
  int64_t parameter_count() const;

  at::Tensor tok_embedding;  // [V, d]
  std::vector<BlockParams> blocks;
  at::Tensor final_norm;  // [d]
  at::Tensor lm_head;     // [V, d]; undefined when tied (head uses tok_embedding)

 private:
  ModelConfig config_;
  int64_t head_dim_;
  std::shared_ptr<const ParallelLinear> parallel_ = std::make_shared<ParallelLinear>();
  std::vector<std::string> not_counted_in_norm_;  // names, set by a model-parallel plan
  std::vector<bool> held_;                        // per model unit; empty: every unit
  RopeTables rope_;
};

}  // namespace dtlab
