// weight_grad_store_test.cpp: zero bubble's deferred weight gradients (lab/weight_grad_store.hpp) — B leaves the
// weights untouched and files one entry per linear, W gives them the plain backward's gradients, through a cast too,
// and outside a capture the layer is at::linear.
#include <gtest/gtest.h>

#include <torch/csrc/autograd/autograd.h>

#include "lab/model.hpp"
#include "lab/model_shape.hpp"
#include "lab/weight_grad_store.hpp"

namespace dtlab {
namespace {

struct TwoLayers {
  at::Tensor w1 = at::randn({6, 4}).requires_grad_(true);
  at::Tensor w2 = at::randn({3, 6}).requires_grad_(true);
  at::Tensor norm = at::ones({6}).requires_grad_(true);  // not a linear: its gradient comes in B
  at::Tensor forward(const at::Tensor& x) const {
    return deferrable_linear(at::silu(deferrable_linear(x, w1)) * norm, w2);
  }
};

TEST(WeightGradStore, WeightPassGivesThePlainBackwardsGradientsAndBGivesTheRest) {
  at::manual_seed(3);
  const TwoLayers net;
  const at::Tensor x = at::randn({2, 5, 4});
  const at::Tensor g = at::randn({2, 5, 3});
  at::Tensor x_plain = x.clone().requires_grad_(true);
  torch::autograd::backward({net.forward(x_plain)}, {g});
  const at::Tensor w1_grad = net.w1.grad().clone(), w2_grad = net.w2.grad().clone(), n_grad = net.norm.grad().clone();
  for (const at::Tensor* t : {&net.w1, &net.w2, &net.norm}) t->mutable_grad() = at::Tensor();

  WeightGradStore store;
  at::Tensor x_split = x.clone().requires_grad_(true);
  at::Tensor y;
  {
    WeightGradCapture capture(store);
    y = net.forward(x_split);
  }
  torch::autograd::backward({y}, {g}, /*retain_graph=*/true);  // B
  EXPECT_EQ(store.pending(), 2u);
  EXPECT_FALSE(net.w1.grad().defined());
  EXPECT_FALSE(net.w2.grad().defined());
  EXPECT_TRUE(at::allclose(net.norm.grad(), n_grad));
  EXPECT_TRUE(at::allclose(x_split.grad(), x_plain.grad(), 1e-5, 1e-6));
  store.apply();  // W
  EXPECT_EQ(store.pending(), 0u);
  EXPECT_TRUE(at::allclose(net.w1.grad(), w1_grad, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(net.w2.grad(), w2_grad, 1e-5, 1e-6));
}

TEST(WeightGradStore, TheGradientReachesTheParameterThroughACast) {
  at::manual_seed(4);
  const at::Tensor master = at::randn({3, 4}, at::kDouble).requires_grad_(true);
  const at::Tensor x = at::randn({5, 4});
  WeightGradStore store;
  at::Tensor y;
  {
    WeightGradCapture capture(store);
    y = deferrable_linear(x, master.to(at::kFloat));  // the layer sees a cast, as under mixed precision
  }
  y.sum().backward({}, /*retain_graph=*/true);
  EXPECT_FALSE(master.grad().defined());
  store.apply();
  ASSERT_TRUE(master.grad().defined());
  EXPECT_TRUE(at::allclose(master.grad(), at::ones({5, 3}, at::kDouble).t().mm(x.to(at::kDouble)), 1e-5, 1e-6));
}

TEST(WeightGradStore, OutsideACaptureTheLayerIsPlainLinearAndCapturesDoNotNest) {
  const at::Tensor w = at::randn({3, 4}).requires_grad_(true), x = at::randn({2, 4});
  const at::Tensor plain = deferrable_linear(x, w);
  EXPECT_TRUE(at::equal(plain, at::linear(x, w)));
  EXPECT_EQ(plain.grad_fn()->name(), at::linear(x, w).grad_fn()->name());
  WeightGradStore store, other;
  WeightGradCapture capture(store);
  EXPECT_NE(deferrable_linear(x, w).grad_fn()->name(), plain.grad_fn()->name());
  EXPECT_THROW(WeightGradCapture nested(other), std::logic_error);
}

TEST(WeightGradStore, TheModelsLinearsAllDeferUnderACapture) {
  ModelConfig m;
  apply_model_preset("tiny", m);
  GPT model(m, 1);
  const at::Tensor tokens = at::randint(m.vocab_size, {2, m.seq_len});
  WeightGradStore store;
  at::Tensor loss;
  {
    WeightGradCapture capture(store);
    loss = model.loss_sum(model.forward(tokens), tokens);
  }
  loss.backward({}, /*retain_graph=*/true);
  // 7 linears per block and the head; the embedding and the norms get theirs in B.
  EXPECT_EQ(store.pending(), static_cast<size_t>(7 * m.n_layers + 1));
  EXPECT_TRUE(model.tok_embedding.grad().defined());
  EXPECT_FALSE(model.blocks[0].wq.grad().defined());
  store.apply();
  EXPECT_TRUE(model.blocks[0].wq.grad().defined());
  EXPECT_TRUE(model.lm_head.grad().defined());
}

}  // namespace
}  // namespace dtlab
