// rope.cpp: the CPU reference of the fused rotary embedding (see rope.hpp).
#include "kernels/rope.hpp"

namespace dtlab::kernels {

void rope_cpu(const float* x, float* out, const float* cos, const float* sin, const RopeShape& shape, bool inverse) {
  const float sign = inverse ? -1.0f : 1.0f;
  for (int64_t r = 0; r < shape.rows; ++r) {
    const int64_t s = (r / shape.heads) % shape.seq_len;
    const float* in_row = x + r * 2 * shape.half;
    float* out_row = out + r * 2 * shape.half;
    for (int64_t i = 0; i < shape.half; ++i) {
      rope_rotate(in_row[i], in_row[i + shape.half], cos[s * shape.half + i], sign * sin[s * shape.half + i],
                  out_row[i], out_row[i + shape.half]);
    }
  }
}

}  // namespace dtlab::kernels
