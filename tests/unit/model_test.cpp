// model_test.cpp: the GPT model — shapes, parameter counts against model_shape, RoPE and grouped-query
// attention against naive implementations, deterministic init.
#include <gtest/gtest.h>

#include <cmath>

#include "lab/config.hpp"
#include "lab/model.hpp"
#include "lab/model_shape.hpp"

namespace dtlab {
namespace {

ModelConfig preset(const std::string& name) {
  ModelConfig m;
  apply_model_preset(name, m);
  return m;
}

TEST(Model, ParameterCountMatchesShapeFormulaForEveryTrainablePreset) {
  for (const std::string name : {"tiny", "small"}) {
    ModelConfig m = preset(name);
    GPT model(m, 1);
    EXPECT_EQ(model.parameter_count(), model_counts(m).params) << name;
  }
  ModelConfig tied = preset("tiny");
  tied.tie_embeddings = true;
  GPT model(tied, 1);
  EXPECT_EQ(model.parameter_count(), model_counts(tied).params);
  EXPECT_FALSE(model.lm_head.defined());
}

TEST(Model, PresetSizesAreAsAdvertised) {
  EXPECT_NEAR(static_cast<double>(model_counts(preset("tiny")).params), 0.1e6, 0.05e6);
  EXPECT_NEAR(static_cast<double>(model_counts(preset("small")).params), 5e6, 0.5e6);
  EXPECT_NEAR(static_cast<double>(model_counts(preset("medium")).params), 50e6, 5e6);
}

TEST(Model, ForwardShapesAndUnitsCoverEveryParameter) {
  ModelConfig m = preset("tiny");
  GPT model(m, 7);
  at::Tensor tokens = at::randint(0, m.vocab_size, {3, m.seq_len}, at::kLong);
  at::Tensor logits = model.forward(tokens);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, m.seq_len, m.vocab_size}));
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
  int64_t counted = 0;
  auto units = model.units();
  EXPECT_EQ(units.size(), static_cast<size_t>(m.n_layers + 2));
  for (const auto& u : units)
    for (const auto& p : u.params) counted += p.tensor->numel();
  EXPECT_EQ(counted, model.parameter_count());
}

TEST(Model, InitIsDeterministicInTheSeed) {
  ModelConfig m = preset("tiny");
  GPT a(m, 42), b(m, 42), c(m, 43);
  auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  bool any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(at::equal(*pa[i].tensor, *pb[i].tensor)) << pa[i].name;
    if (!pa[i].is_norm_or_embedding || pa[i].name == "tok_embedding")
      any_differs |= !at::equal(*pa[i].tensor, *pc[i].tensor);
  }
  EXPECT_TRUE(any_differs);
}

// Naive RoPE: rotate pair (i, i + hd/2) of position p by p * theta^(-2i/hd), one element at a time.
TEST(Model, RopeMatchesNaiveRotation) {
  const int64_t B = 1, H = 2, S = 5, hd = 8;
  const double theta = 10000.0;
  at::Tensor x = at::randn({B, H, S, hd}, at::kDouble);
  RopeTables rope = make_rope_tables(S, hd, theta);
  rope.cos = rope.cos.to(at::kDouble);
  rope.sin = rope.sin.to(at::kDouble);
  at::Tensor got = apply_rope(x, rope);
  auto xa = x.accessor<double, 4>();
  auto ga = got.accessor<double, 4>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t p = 0; p < S; ++p)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double angle = static_cast<double>(p) * std::pow(theta, -2.0 * static_cast<double>(i) / hd);
        const double a = xa[0][h][p][i], b = xa[0][h][p][i + hd / 2];
        // tables are stored in fp32, so compare at fp32 precision
        EXPECT_NEAR(ga[0][h][p][i], a * std::cos(angle) - b * std::sin(angle), 1e-6);
        EXPECT_NEAR(ga[0][h][p][i + hd / 2], b * std::cos(angle) + a * std::sin(angle), 1e-6);
      }
  // position 0 is not rotated
  EXPECT_TRUE(at::allclose(got.select(2, 0), x.select(2, 0)));
}

// Naive attention block: explicit per-head loops, K/V head = q_head / (H/KV), causal softmax.
at::Tensor naive_attention_block(const GPT& model, const ModelConfig& m, const at::Tensor& x) {
  const BlockParams& p = model.blocks[0];
  const int64_t B = x.size(0), S = x.size(1), H = m.n_heads, KV = m.n_kv_heads, hd = m.d_model / H;
  at::Tensor h = x * at::rsqrt(x.pow(2).mean(-1, true) + m.norm_eps) * p.attn_norm;
  at::Tensor q = at::matmul(h, p.wq.t()).view({B, S, H, hd}).transpose(1, 2);
  at::Tensor k = at::matmul(h, p.wk.t()).view({B, S, KV, hd}).transpose(1, 2);
  at::Tensor v = at::matmul(h, p.wv.t()).view({B, S, KV, hd}).transpose(1, 2);
  RopeTables rope = make_rope_tables(S, hd, m.rope_theta);
  q = apply_rope(q, rope);
  k = apply_rope(k, rope);
  at::Tensor mask = at::ones({S, S}, at::kBool).triu(1);
  std::vector<at::Tensor> heads;
  for (int64_t head = 0; head < H; ++head) {
    const int64_t kv = head / (H / KV);
    at::Tensor scores = at::matmul(q.select(1, head), k.select(1, kv).transpose(-1, -2)) / std::sqrt(double(hd));
    scores = scores.masked_fill(mask, -INFINITY);
    heads.push_back(at::matmul(at::softmax(scores, -1), v.select(1, kv)));
  }
  at::Tensor attn = at::stack(heads, 1).transpose(1, 2).reshape({B, S, H * hd});
  return x + at::matmul(attn, p.wo.t());
}

TEST(Model, GroupedQueryAttentionMatchesNaiveForEveryKvGrouping) {
  at::NoGradGuard no_grad;
  for (int64_t kv : {1, 2, 4}) {
    ModelConfig m = preset("tiny");
    m.n_kv_heads = kv;
    GPT model(m, 3);
    at::Tensor x = at::randn({2, 16, m.d_model});
    at::Tensor got = model.block_attention(0, x);
    at::Tensor want = naive_attention_block(model, m, x);
    EXPECT_TRUE(at::allclose(got, want, 1e-4, 1e-5))
        << "n_kv_heads=" << kv << " max diff " << (got - want).abs().max().item<double>();
  }
}

TEST(Model, LossIgnoresMaskedTargets) {
  at::Tensor logits = at::randn({1, 4, 10});
  at::Tensor targets = at::tensor({1, 2, 3, 4}, at::kLong).view({1, 4});
  at::Tensor masked = targets.clone();
  masked[0][1] = -100;
  masked[0][3] = -100;
  const double full = GPT::loss_sum(logits, targets).item<double>();
  const double partial = GPT::loss_sum(logits, masked).item<double>();
  const double expect_partial =
      GPT::loss_sum(logits.index_select(1, at::tensor({0, 2}, at::kLong)), at::tensor({1, 3}, at::kLong).view({1, 2}))
          .item<double>();
  EXPECT_LT(partial, full);
  EXPECT_NEAR(partial, expect_partial, 1e-5);
}

}  // namespace
}  // namespace dtlab
