// cross_entropy.hpp: token cross-entropy straight from the logits, CPU reference and CUDA version (the GPU path's
// fused loss).
//
// logits is [rows, vocab] contiguous in its own type (bf16 on a bf16 run), targets [rows] int64. Forward, per row in
// fp32: lse = max + log Σ exp(x − max), loss = lse − x[target]; a row whose target is `ignore_index` has loss 0.
// Backward: grad[r, j] = g · (exp(x[r, j] − lse[r]) − [j = target[r]]), 0 on ignored rows, in the logits' type, with g
// the loss sum's incoming gradient (read on the device: no host sync).
// The unfused path (lab/model.cpp loss_sum: the logits cast to fp32, log-softmax, NLL) materialises two fp32 copies
// of the logits — 6.6 GB each for 32k tokens over a 50k vocabulary — and reads and writes them in four passes; this
// reads the logits twice forward and once backward and keeps only lse (4 bytes a row) besides them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/element_type.hpp"

namespace dtlab::kernels {

struct CrossEntropyShape {
  int64_t rows = 0, vocab = 0;
  int64_t ignore_index = -100;
};

// Forward on the host, fp32 logits: loss[r] and lse[r] per row.
void cross_entropy_forward_cpu(const float* logits, const int64_t* targets, float* loss, float* lse,
                               const CrossEntropyShape& shape);
// Backward on the host: grad[r, j] for incoming gradient g.
void cross_entropy_backward_cpu(const float* logits, const int64_t* targets, const float* lse, float g, float* grad,
                                const CrossEntropyShape& shape);

#ifdef DTLAB_WITH_CUDA
// The same on device pointers; logits and grad of `type`, g a device pointer to one float; on `stream`.
void cross_entropy_forward_cuda(const void* logits, ElementType type, const int64_t* targets, float* loss, float* lse,
                                const CrossEntropyShape& shape, void* stream);
void cross_entropy_backward_cuda(const void* logits, ElementType type, const int64_t* targets, const float* lse,
                                 const float* g, void* grad, const CrossEntropyShape& shape, void* stream);
#endif

}  // namespace dtlab::kernels
