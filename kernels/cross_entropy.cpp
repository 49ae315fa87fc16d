// cross_entropy.cpp: the CPU reference of the fused cross-entropy (see cross_entropy.hpp).
#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtlab::kernels {

void cross_entropy_forward_cpu(const float* logits, const int64_t* targets, float* loss, float* lse,
                               const CrossEntropyShape& shape) {
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float* x = logits + r * shape.vocab;
    float top = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < shape.vocab; ++j) top = std::max(top, x[j]);
    float sum = 0;
    for (int64_t j = 0; j < shape.vocab; ++j) sum += std::exp(x[j] - top);
    lse[r] = top + std::log(sum);
    loss[r] = targets[r] == shape.ignore_index ? 0.0f : lse[r] - x[targets[r]];
  }
}

void cross_entropy_backward_cpu(const float* logits, const int64_t* targets, const float* lse, float g, float* grad,
                                const CrossEntropyShape& shape) {
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float* x = logits + r * shape.vocab;
    float* out = grad + r * shape.vocab;
    const bool ignored = targets[r] == shape.ignore_index;
    for (int64_t j = 0; j < shape.vocab; ++j)
      out[j] = ignored ? 0.0f : g * (std::exp(x[j] - lse[r]) - (j == targets[r] ? 1.0f : 0.0f));
  }
}

}  // namespace dtlab::kernels
