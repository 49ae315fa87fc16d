// fused_ops.hpp: the GPU path's fused rotary embedding and token cross-entropy as autograd operations, over the CUDA
// kernels of kernels/rope.hpp and kernels/cross_entropy.hpp. lab/model.cpp runs them on CUDA tensors; host tensors
// keep the unfused ATen composition (so CPU runs are bit-for-bit what they were).
//
// Why: on a GPU a 125m step spent a third of its device time in elementwise kernels, most of them RoPE's strided
// multiplies, adds and cat (about 20 launches per attention block, forward and backward), and 13 ms in the
// log-softmax of fp32 copies of the logits (docs/performance.md, "GPU path"). One kernel each way replaces them.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace dtlab {

// Whether `t` can take the fused path: a CUDA tensor of fp32, bf16 or fp16 in a cuda build, on a GPU of compute
// capability 8.0 or newer (kernels/ is built for sm_80 and sm_90, with PTX for newer ones).
bool fused_ops_apply(const at::Tensor& t);

// x: [B, S, H, head_dim] (contiguous; the heads before the transpose); cos, sin: fp32 [>= S, head_dim / 2] on the
// same device. Returns rope(x), same shape and type; its backward rotates the gradient back.
at::Tensor fused_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// logits: [N, V] contiguous; targets: [N] int64. Σ over rows whose target is not ignore_index of the row's
// cross-entropy, as an fp32 scalar; backward writes d(sum)/d(logits) in the logits' type.
at::Tensor fused_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index);

}  // namespace dtlab
