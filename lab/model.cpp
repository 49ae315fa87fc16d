// model.cpp: the GPT decoder (see model.hpp for the architecture and the unit split) and the whole-model
// ParallelLinear (lab/parallel_linear.hpp), whose loss is GPT::loss_sum.
#include "lab/model.hpp"

#include "lab/memory.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>

#include "lab/data.hpp"
#include "lab/fused_ops.hpp"

namespace dtlab {

std::vector<at::Tensor*> BlockParams::all() {
  return {&attn_norm, &wq, &wk, &wv, &wo, &mlp_norm, &w_gate, &w_up, &w_down};
}

RopeTables make_rope_tables(int64_t seq_len, int64_t head_dim, double theta) {
  // Angle of pair i at position p: p * theta^(-2i/hd), computed in double then stored as fp32.
  auto options = at::TensorOptions().dtype(at::kDouble);
  at::Tensor inv_freq = at::pow(theta, -at::arange(0, head_dim, 2, options) / static_cast<double>(head_dim));
  at::Tensor angles = at::outer(at::arange(seq_len, options), inv_freq);
  return {at::cos(angles).to(at::kFloat), at::sin(angles).to(at::kFloat)};
}

at::Tensor apply_rope(const at::Tensor& x, const RopeTables& rope) {
  const int64_t half = x.size(-1) / 2;
  const int64_t seq = x.size(-2);
  at::Tensor cos = rope.cos.slice(0, 0, seq).to(x.scalar_type());
  at::Tensor sin = rope.sin.slice(0, 0, seq).to(x.scalar_type());
  at::Tensor a = x.narrow(-1, 0, half);
  at::Tensor b = x.narrow(-1, half, half);
  return at::cat({a * cos - b * sin, b * cos + a * sin}, -1);
}

namespace {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return at::rms_norm(x, {x.size(-1)}, weight, eps);
}

at::Tensor normal_init(at::IntArrayRef sizes, double std, at::Generator& gen) {
  return at::normal(0.0, std, sizes, gen, at::TensorOptions().dtype(at::kFloat));
}

}  // namespace

GPT::GPT(const ModelConfig& config, int64_t seed) : config_(config) {
  const int64_t d = config.d_model, hd = config.d_model / config.n_heads;
  head_dim_ = hd;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  const double std = config.init_std;
  const double out_std = std / std::sqrt(2.0 * static_cast<double>(config.n_layers));
  at::NoGradGuard no_grad;
  tok_embedding = normal_init({config.vocab_size, d}, std, gen);
  for (int64_t l = 0; l < config.n_layers; ++l) {
    BlockParams b;
    b.attn_norm = at::ones({d});
    b.wq = normal_init({config.n_heads * hd, d}, std, gen);
    b.wk = normal_init({config.n_kv_heads * hd, d}, std, gen);
    b.wv = normal_init({config.n_kv_heads * hd, d}, std, gen);
    b.wo = normal_init({d, config.n_heads * hd}, out_std, gen);
    b.mlp_norm = at::ones({d});
    b.w_gate = normal_init({config.ffn_hidden, d}, std, gen);
    b.w_up = normal_init({config.ffn_hidden, d}, std, gen);
    b.w_down = normal_init({d, config.ffn_hidden}, out_std, gen);
    blocks.push_back(std::move(b));
  }
  final_norm = at::ones({d});
  if (!config.tie_embeddings) lm_head = normal_init({config.vocab_size, d}, std, gen);
  for (auto& p : parameters()) p.tensor->requires_grad_(true);
  // Constants every forward reads, not parameters: counted with the activations, as the activation model counts them.
  MemoryScope tables(MemoryCategory::activations);
  rope_ = make_rope_tables(config.seq_len, hd, config.rope_theta);
}

void GPT::to(at::Device device) {
  at::NoGradGuard no_grad;
  for (auto& p : parameters()) *p.tensor = p.tensor->to(device).detach().requires_grad_(true);
  rope_.cos = rope_.cos.to(device);
  rope_.sin = rope_.sin.to(device);
}

at::Tensor GPT::embed(const at::Tensor& tokens) const { return parallel_->embed(tok_embedding, tokens); }

void GPT::set_parallel_linear(std::shared_ptr<const ParallelLinear> parallel) {
  if (!parallel) throw std::invalid_argument("GPT::set_parallel_linear: null (the whole-model layers are the default)");
  parallel_ = std::move(parallel);
}

at::Tensor GPT::block_attention(int64_t index, const at::Tensor& x) const {
  const BlockParams& p = blocks[static_cast<size_t>(index)];
  const ParallelLinear& layers = *parallel_;
  const int64_t hd = head_dim_;
  at::Tensor h = layers.enter(rms_norm(x, layers.replicated(p.attn_norm), config_.norm_eps));
  const int64_t B = h.size(0), S = h.size(1);
  const int64_t H = p.wq.size(0) / hd, KV = p.wk.size(0) / hd;  // the heads this rank's weights hold
  at::Tensor q = layers.column(h, p.wq).view({B, S, H, hd});
  at::Tensor k = layers.column(h, p.wk).view({B, S, KV, hd});
  at::Tensor v = layers.column(h, p.wv).view({B, S, KV, hd}).transpose(1, 2);
  if (fused_ops_apply(h)) {  // a GPU: RoPE in one kernel on the [B, S, heads, hd] layout, then the transpose (a view)
    q = fused_rope(q, rope_.cos, rope_.sin).transpose(1, 2);
    k = fused_rope(k, rope_.cos, rope_.sin).transpose(1, 2);
  } else {
    q = apply_rope(q.transpose(1, 2), rope_);
    k = apply_rope(k.transpose(1, 2), rope_);
  }
  if (KV != H) {  // grouped-query: each K/V head serves H/KV query heads (expanded so SDPA's fused CPU kernel applies)
    k = k.unsqueeze(2).expand({B, KV, H / KV, S, hd}).reshape({B, H, S, hd});
    v = v.unsqueeze(2).expand({B, KV, H / KV, S, hd}).reshape({B, H, S, hd});
  }
  at::Tensor attn = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                     /*is_causal=*/true);
  attn = attn.transpose(1, 2).reshape({B, S, H * hd});
  return x + layers.leave(layers.row(attn, p.wo));
}

at::Tensor GPT::block_mlp(int64_t index, const at::Tensor& x) const {
  const BlockParams& p = blocks[static_cast<size_t>(index)];
  const ParallelLinear& layers = *parallel_;
  at::Tensor h = layers.enter(rms_norm(x, layers.replicated(p.mlp_norm), config_.norm_eps));
  return x + layers.leave(layers.row(at::silu(layers.column(h, p.w_gate)) * layers.column(h, p.w_up), p.w_down));
}

at::Tensor GPT::block(int64_t index, const at::Tensor& x) const { return block_mlp(index, block_attention(index, x)); }

at::Tensor GPT::head(const at::Tensor& x) const {
  at::Tensor h = rms_norm(x, parallel_->replicated(final_norm), config_.norm_eps);
  return parallel_->logits(h, config_.tie_embeddings ? tok_embedding : lm_head);
}

at::Tensor GPT::forward(const at::Tensor& tokens) {
  at::Tensor x = embed(tokens);
  for (int64_t l = 0; l < config_.n_layers; ++l) x = block(l, x);
  return head(x);
}

at::Tensor GPT::loss_sum(const at::Tensor& logits, const at::Tensor& targets) {
  const int64_t V = logits.size(-1);
  if (fused_ops_apply(logits))  // a GPU: one kernel each way, no fp32 copies of the logits (lab/fused_ops.hpp)
    return fused_cross_entropy_sum(logits.reshape({-1, V}).contiguous(), targets.reshape({-1}).contiguous(),
                                   kIgnoreIndex);
  return at::cross_entropy_loss(logits.reshape({-1, V}).to(at::kFloat), targets.reshape({-1}),
                                /*weight=*/{}, at::Reduction::Sum, kIgnoreIndex);
}

at::Tensor ParallelLinear::embed(const at::Tensor& table, const at::Tensor& tokens) const {
  return at::embedding(table, tokens);
}

at::Tensor ParallelLinear::loss_sum(const at::Tensor& logits, const at::Tensor& targets) const {
  return GPT::loss_sum(logits, targets);
}

std::vector<ParamRef> GPT::parameters() {
  std::vector<ParamRef> out;
  for (auto& unit : units())
    for (auto& p : unit.params) out.push_back(p);
  return out;
}

void GPT::set_counted_in_norm(const std::string& name, bool counted) {
  auto& names = not_counted_in_norm_;
  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  if (!counted) names.push_back(name);
}

std::vector<ModelUnit> GPT::units() {
  static const char* kBlockNames[] = {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"};
  std::vector<ModelUnit> out;
  if (holds_unit(0)) out.push_back({"embedding", {{"tok_embedding", &tok_embedding, true}}});
  for (size_t l = 0; l < blocks.size(); ++l) {
    if (!holds_unit(static_cast<int>(l) + 1)) continue;
    ModelUnit unit{"block." + std::to_string(l), {}};
    auto tensors = blocks[l].all();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const bool is_norm = i == 0 || i == 5;
      unit.params.push_back({unit.name + "." + kBlockNames[i], tensors[i], is_norm});
    }
    out.push_back(std::move(unit));
  }
  if (holds_unit(static_cast<int>(blocks.size()) + 1)) {
    ModelUnit head_unit{"head", {{"final_norm", &final_norm, true}}};
    if (lm_head.defined()) head_unit.params.push_back({"lm_head", &lm_head, false});
    out.push_back(std::move(head_unit));
  }
  for (auto& unit : out)
    for (auto& p : unit.params)
      p.counted_in_norm =
          std::find(not_counted_in_norm_.begin(), not_counted_in_norm_.end(), p.name) == not_counted_in_norm_.end();
  return out;
}

int64_t GPT::parameter_count() const {
  const auto count = [](const at::Tensor& t) { return t.defined() ? t.numel() : int64_t{0}; };  // freed: not held
  int64_t n = count(tok_embedding) + count(final_norm) + count(lm_head);
  for (const auto& b : blocks) {
    auto& mb = const_cast<BlockParams&>(b);
    for (auto* t : mb.all()) n += count(*t);
  }
  return n;
}

void GPT::keep_units(const std::vector<int>& units) {
  const int last = static_cast<int>(blocks.size()) + 1;
  std::vector<bool> held(static_cast<size_t>(last) + 1, false);
  for (int m : units) {
    if (m < 0 || m > last)
      throw std::invalid_argument("GPT::keep_units: model unit " + std::to_string(m) + " is not in 0.." +
                                  std::to_string(last));
    held[static_cast<size_t>(m)] = true;
  }
  if (!held[0]) tok_embedding = at::Tensor();
  for (size_t l = 0; l < blocks.size(); ++l)
    if (!held[l + 1])
      for (at::Tensor* t : blocks[l].all()) *t = at::Tensor();
  if (!held[static_cast<size_t>(last)]) {
    final_norm = at::Tensor();
    lm_head = at::Tensor();
  }
  held_ = std::move(held);
}

}  // namespace dtlab
