// fused_ops_test.cpp: the GPU path's fused RoPE and cross-entropy. Here on any machine: the kernels' CPU references
// equal the model's unfused RoPE and LibTorch's cross-entropy (values and gradients), and the fused ops refuse host
// tensors clearly. On a GPU (skipped without one): the autograd ops on CUDA tensors match the unfused path, forward
// and backward, in fp32 and bf16.
#include <gtest/gtest.h>

#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "kernels/cross_entropy.hpp"
#include "kernels/rope.hpp"
#include "lab/data/sampler.hpp"
#include "lab/fused_ops.hpp"
#include "lab/instrument/gpu.hpp"
#include "lab/model.hpp"

namespace dtlab {
namespace {

constexpr int64_t B = 2, S = 8, H = 3, HD = 16;

// The model's rotation (it runs on [B, H, S, hd]) on x [B, S, H, hd], returned in x's layout.
at::Tensor model_rope(const at::Tensor& x, const RopeTables& rope) {
  return apply_rope(x.transpose(1, 2), rope).transpose(1, 2).contiguous();
}

TEST(FusedKernels, RopeReferenceIsTheModelsRotationAndItsInverseUndoesIt) {
  at::manual_seed(3);
  const RopeTables rope = make_rope_tables(S, HD, 10000.0);
  const at::Tensor x = at::randn({B, S, H, HD});
  const kernels::RopeShape shape{B * S * H, S, H, HD / 2};
  at::Tensor out = at::empty_like(x), back = at::empty_like(x);
  kernels::rope_cpu(x.data_ptr<float>(), out.data_ptr<float>(), rope.cos.data_ptr<float>(), rope.sin.data_ptr<float>(),
                    shape, /*inverse=*/false);
  EXPECT_TRUE(at::allclose(out, model_rope(x, rope), 0, 1e-6)) << (out - model_rope(x, rope)).abs().max();
  kernels::rope_cpu(out.data_ptr<float>(), back.data_ptr<float>(), rope.cos.data_ptr<float>(),
                    rope.sin.data_ptr<float>(), shape, /*inverse=*/true);
  EXPECT_TRUE(at::allclose(back, x, 0, 1e-5)) << (back - x).abs().max();
  // The inverse is the rotation's backward: <rope(x), g> = <x, rope⁻¹(g)> for any g.
  const at::Tensor g = at::randn_like(x);
  at::Tensor g_back = at::empty_like(g);
  kernels::rope_cpu(g.data_ptr<float>(), g_back.data_ptr<float>(), rope.cos.data_ptr<float>(),
                    rope.sin.data_ptr<float>(), shape, /*inverse=*/true);
  EXPECT_NEAR((out * g).sum().item<double>(), (x * g_back).sum().item<double>(), 1e-3);
}

TEST(FusedKernels, CrossEntropyReferenceIsLibTorchsLossAndGradient) {
  at::manual_seed(4);
  const int64_t N = 6, V = 37;
  const at::Tensor logits = (3 * at::randn({N, V})).requires_grad_(true);
  at::Tensor targets = at::randint(0, V, {N}, at::kLong);
  targets[2] = kIgnoreIndex;
  const at::Tensor expected = at::cross_entropy_loss(logits, targets, {}, at::Reduction::None, kIgnoreIndex);
  const kernels::CrossEntropyShape shape{N, V, kIgnoreIndex};
  std::vector<float> loss(N), lse(N), grad(N * V);
  const at::Tensor plain = logits.detach().contiguous();
  kernels::cross_entropy_forward_cpu(plain.data_ptr<float>(), targets.data_ptr<int64_t>(), loss.data(), lse.data(),
                                     shape);
  for (int64_t r = 0; r < N; ++r) EXPECT_NEAR(loss[r], expected[r].item<float>(), 1e-5) << "row " << r;
  EXPECT_EQ(loss[2], 0.0f);
  const float g = 0.25f;  // the incoming gradient of the sum
  expected.sum().backward(at::full({}, g));
  kernels::cross_entropy_backward_cpu(plain.data_ptr<float>(), targets.data_ptr<int64_t>(), lse.data(), g, grad.data(),
                                      shape);
  const at::Tensor ours = at::from_blob(grad.data(), {N, V}, at::kFloat);
  EXPECT_TRUE(at::allclose(ours, logits.grad(), 0, 1e-6)) << (ours - logits.grad()).abs().max();
}

TEST(FusedOps, HostTensorsKeepTheUnfusedPathAndAreRefusedClearly) {
  const at::Tensor x = at::randn({B, S, H, HD});
  EXPECT_FALSE(fused_ops_apply(x));
  const RopeTables rope = make_rope_tables(S, HD, 10000.0);
  try {
    fused_rope(x, rope.cos, rope.sin);
    FAIL() << "a host tensor took the fused path";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fused_rope: x must be a CUDA tensor"), std::string::npos) << e.what();
  }
}

// On the GPU: fused vs unfused, values and gradients, in fp32 and bf16.
TEST(FusedOps, OnTheGpuRopeAndCrossEntropyMatchTheUnfusedPath) {
  const GpuStatus status = gpu_status();
  if (status.device_count == 0) GTEST_SKIP() << status.summary;
  at::manual_seed(5);
  const at::Device cuda(at::kCUDA, 0);
  RopeTables rope = make_rope_tables(S, HD, 10000.0);
  rope.cos = rope.cos.to(cuda);
  rope.sin = rope.sin.to(cuda);
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const double tol = type == at::kFloat ? 1e-5 : 2e-2;  // bf16: the unfused path rounds after every op
    SCOPED_TRACE(c10::toString(type));
    const at::Tensor x0 = at::randn({B, S, H, HD}, at::TensorOptions().device(cuda)).to(type);
    const at::Tensor g = at::randn_like(x0);
    const at::Tensor x_fused = x0.clone().requires_grad_(true), x_plain = x0.clone().requires_grad_(true);
    const at::Tensor fused = fused_rope(x_fused, rope.cos, rope.sin);
    const at::Tensor plain = model_rope(x_plain, rope);
    EXPECT_TRUE(at::allclose(fused.to(at::kFloat), plain.to(at::kFloat), tol, tol));
    fused.backward(g);
    plain.backward(g);
    EXPECT_TRUE(at::allclose(x_fused.grad().to(at::kFloat), x_plain.grad().to(at::kFloat), tol, tol))
        << (x_fused.grad().to(at::kFloat) - x_plain.grad().to(at::kFloat)).abs().max();

    const int64_t N = 33, V = 1000;
    const at::Tensor logits0 = (4 * at::randn({N, V}, at::TensorOptions().device(cuda))).to(type);
    at::Tensor targets = at::randint(0, V, {N}, at::TensorOptions().dtype(at::kLong).device(cuda));
    targets.index_put_({5}, kIgnoreIndex);
    const at::Tensor l_fused = logits0.clone().requires_grad_(true), l_plain = logits0.clone().requires_grad_(true);
    const at::Tensor loss_fused = fused_cross_entropy_sum(l_fused, targets, kIgnoreIndex);
    const at::Tensor loss_plain =
        at::cross_entropy_loss(l_plain.to(at::kFloat), targets, {}, at::Reduction::Sum, kIgnoreIndex);
    EXPECT_EQ(loss_fused.scalar_type(), at::kFloat);
    EXPECT_NEAR(loss_fused.item<double>(), loss_plain.item<double>(), 1e-4 * loss_plain.abs().item<double>());
    loss_fused.backward(at::full({}, 0.5, loss_fused.options()));
    loss_plain.backward(at::full({}, 0.5, loss_plain.options()));
    EXPECT_EQ(l_fused.grad().scalar_type(), type);
    EXPECT_TRUE(at::allclose(l_fused.grad().to(at::kFloat), l_plain.grad().to(at::kFloat), tol, 1e-6 + tol * 1e-2))
        << (l_fused.grad().to(at::kFloat) - l_plain.grad().to(at::kFloat)).abs().max();
  }
}

}  // namespace
}  // namespace dtlab
