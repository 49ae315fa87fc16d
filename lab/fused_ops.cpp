// fused_ops.cpp: autograd operations over kernels/rope and kernels/cross_entropy (see fused_ops.hpp). The kernels run
// on the tensors' current CUDA stream.
#include "lab/fused_ops.hpp"

#include <stdexcept>
#include <string>

#include <torch/csrc/autograd/custom_function.h>

#ifdef DTLAB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "kernels/cross_entropy.hpp"
#include "kernels/rope.hpp"
#include "lab/device.hpp"

namespace dtlab {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

#ifdef DTLAB_WITH_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

kernels::ElementType element_type(const at::Tensor& t, const char* who) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return kernels::ElementType::float32;
    case at::kBFloat16:
      return kernels::ElementType::bfloat16;
    case at::kHalf:
      return kernels::ElementType::float16;
    default:
      throw std::invalid_argument(std::string(who) + ": no fused kernel for " +
                                  std::string(c10::toString(t.scalar_type())));
  }
}

// out <- rope(x) (inverse: rotated back) on x's current stream.
at::Tensor launch_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool inverse) {
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  const kernels::RopeShape shape{in.size(0) * in.size(1) * in.size(2), in.size(1), in.size(2), in.size(3) / 2};
  kernels::rope_cuda(in.data_ptr(), out.data_ptr(), element_type(in, "fused_rope"), cos.data_ptr<float>(),
                     sin.data_ptr<float>(), shape, inverse, current_cuda_stream(in.device()));
  return out;
}

struct RopeFunction : torch::autograd::Function<RopeFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return launch_rope(x, cos, sin, /*inverse=*/false);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {launch_rope(grads[0], saved[0], saved[1], /*inverse=*/true), at::Tensor(), at::Tensor()};
  }
};

struct CrossEntropyFunction : torch::autograd::Function<CrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets,
                            int64_t ignore_index) {
    const kernels::CrossEntropyShape shape{logits.size(0), logits.size(1), ignore_index};
    const auto rows = at::TensorOptions().dtype(at::kFloat).device(logits.device());
    at::Tensor loss = at::empty({shape.rows}, rows), lse = at::empty({shape.rows}, rows);
    kernels::cross_entropy_forward_cuda(logits.data_ptr(), element_type(logits, "fused_cross_entropy_sum"),
                                        targets.data_ptr<int64_t>(), loss.data_ptr<float>(), lse.data_ptr<float>(),
                                        shape, current_cuda_stream(logits.device()));
    ctx->save_for_backward({logits, targets, lse});
    ctx->saved_data["ignore_index"] = ignore_index;
    return loss.sum();
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1], &lse = saved[2];
    const kernels::CrossEntropyShape shape{logits.size(0), logits.size(1), ctx->saved_data["ignore_index"].toInt()};
    const at::Tensor g = grads[0].to(at::kFloat).contiguous();  // one float on the device: read by the kernel
    at::Tensor grad = at::empty_like(logits);
    kernels::cross_entropy_backward_cuda(logits.data_ptr(), element_type(logits, "fused_cross_entropy_sum"),
                                         targets.data_ptr<int64_t>(), lse.data_ptr<float>(), g.data_ptr<float>(),
                                         grad.data_ptr(), shape, current_cuda_stream(logits.device()));
    return {grad, at::Tensor(), at::Tensor()};
  }
};
#endif  // DTLAB_WITH_CUDA

}  // namespace

bool fused_ops_apply(const at::Tensor& t) {
#ifdef DTLAB_WITH_CUDA
  const at::ScalarType type = t.scalar_type();
  if (!t.is_cuda() || (type != at::kFloat && type != at::kBFloat16 && type != at::kHalf)) return false;
  // kernels/ holds sm_80 and sm_90 code (and compute_90 PTX for newer GPUs): an older GPU keeps the unfused path.
  return at::cuda::getDeviceProperties(t.device().index())->major >= 8;
#else
  (void)t;
  return false;
#endif
}

at::Tensor fused_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  require(x.dim() == 4 && x.size(3) % 2 == 0, "fused_rope: x must be [B, S, H, head_dim] with an even head_dim");
  require(cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat && cos.is_contiguous() &&
              sin.is_contiguous() && cos.dim() == 2 && cos.size(0) >= x.size(1) && cos.size(1) == x.size(3) / 2 &&
              cos.sizes() == sin.sizes() && cos.device() == x.device() && sin.device() == x.device(),
          "fused_rope: cos and sin must be contiguous fp32 [>= seq_len, head_dim / 2] tables on x's device");
  require(fused_ops_apply(x), "fused_rope: x must be a CUDA tensor of fp32, bf16 or fp16 in a cuda build");
#ifdef DTLAB_WITH_CUDA
  return RopeFunction::apply(x, cos, sin);
#else
  throw std::logic_error("fused_rope: unreachable in a cpu build (no tensor passes fused_ops_apply)");
#endif
}

at::Tensor fused_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index) {
  require(logits.dim() == 2 && logits.is_contiguous(), "fused_cross_entropy_sum: logits must be contiguous [N, V]");
  require(targets.dim() == 1 && targets.size(0) == logits.size(0) && targets.scalar_type() == at::kLong &&
              targets.is_contiguous() && targets.device() == logits.device(),
          "fused_cross_entropy_sum: targets must be contiguous int64 [N] on the logits' device");
  require(fused_ops_apply(logits), "fused_cross_entropy_sum: logits must be a CUDA tensor of fp32, bf16 or fp16");
#ifdef DTLAB_WITH_CUDA
  return CrossEntropyFunction::apply(logits, targets, ignore_index);
#else
  (void)ignore_index;
  throw std::logic_error("fused_cross_entropy_sum: unreachable in a cpu build (no tensor passes fused_ops_apply)");
#endif
}

}  // namespace dtlab
