// rope.hpp: rotary position embedding in one pass, CPU reference and CUDA version (the GPU path's fused RoPE).
//
// x is [rows, 2·half] contiguous, row r = ((b·S + s)·H + h) of a [B, S, H, head_dim] tensor (attention heads before
// the transpose), so position s = (r / heads) % seq_len. For each pair (a, b) = (x[r, i], x[r, i + half]):
//   out[r, i] = a·cos[s, i] − b·sin[s, i],   out[r, i + half] = b·cos[s, i] + a·sin[s, i]
// in fp32, rounded once to the element type. `inverse` rotates by −angle: the backward of the rotation (its
// transpose), used on the gradient. cos and sin are fp32 [seq_len, half] tables (lab/model.cpp make_rope_tables).
// The unfused composition the CPU path runs (lab/model.cpp apply_rope: 4 multiplies, a subtract, an add and a cat,
// each rounding) is the reference the tests hold both versions to.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/element_type.hpp"

namespace dtlab::kernels {

struct RopeShape {
  int64_t rows = 0;     // B·S·H
  int64_t seq_len = 0;  // S
  int64_t heads = 0;    // H
  int64_t half = 0;     // head_dim / 2
};

// The one rule both versions run: pair (a, b) at angle (c, s) -> (out_a, out_b).
DTLAB_HOST_DEVICE inline void rope_rotate(float a, float b, float c, float s, float& out_a, float& out_b) {
  out_a = a * c - b * s;
  out_b = b * c + a * s;
}

// out <- rope(x) on the host; fp32 only (the CPU reference of the tests).
void rope_cpu(const float* x, float* out, const float* cos, const float* sin, const RopeShape& shape, bool inverse);

#ifdef DTLAB_WITH_CUDA
// The same on device pointers of `type`, launched on `stream` (a cudaStream_t as void*).
void rope_cuda(const void* x, void* out, ElementType type, const float* cos, const float* sin, const RopeShape& shape,
               bool inverse, void* stream);
#endif

}  // namespace dtlab::kernels
