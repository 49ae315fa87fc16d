// cross_entropy.cu: CUDA version of the fused cross-entropy (see cross_entropy.hpp). One block per row: forward
// keeps a running (max, Σexp) per thread in one pass over the row, then merges them across the block; backward
// writes each row's gradient from its lse. fp32 arithmetic throughout. Compiled for sm_80 and sm_90.
#include <cfloat>

#include "kernels/cross_entropy.hpp"
#include "kernels/cuda_util.cuh"

namespace dtlab::kernels {
namespace {

constexpr int kThreads = 256;  // per block (one row); a multiple of 32

// (m, s) stands for s·exp(m): the sum of exp(x − m) over the elements seen, with m their maximum.
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  if (a.m == -FLT_MAX) return b;  // nothing seen on one side
  if (b.m == -FLT_MAX) return a;
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// The merged (max, sum) of every thread's, valid in thread 0.
__device__ MaxSum block_merge(MaxSum v) {
  __shared__ MaxSum warps[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
    v = merge(v, other);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) v = merge(v, warps[w]);
  }
  return v;
}

template <typename T>
__global__ void forward_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                               float* __restrict__ loss, float* __restrict__ lse, CrossEntropyShape shape) {
  const int64_t r = blockIdx.x;
  const T* x = logits + r * shape.vocab;
  MaxSum v{-FLT_MAX, 0.0f};
  for (int64_t j = threadIdx.x; j < shape.vocab; j += kThreads) {
    const float value = load_float(x + j);
    if (value > v.m) {
      v.s = (v.m == -FLT_MAX ? 0.0f : v.s * expf(v.m - value)) + 1.0f;
      v.m = value;
    } else {
      v.s += expf(value - v.m);
    }
  }
  v = block_merge(v);
  if (threadIdx.x == 0) {
    const float row_lse = v.m + logf(v.s);
    const int64_t t = targets[r];
    lse[r] = row_lse;
    loss[r] = t == shape.ignore_index ? 0.0f : row_lse - load_float(x + t);
  }
}

template <typename T>
__global__ void backward_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                                const float* __restrict__ lse, const float* __restrict__ g, T* __restrict__ grad,
                                CrossEntropyShape shape) {
  const int64_t r = blockIdx.x;
  const T* x = logits + r * shape.vocab;
  T* out = grad + r * shape.vocab;
  const int64_t t = targets[r];
  const bool ignored = t == shape.ignore_index;
  const float scale = *g, row_lse = lse[r];
  for (int64_t j = threadIdx.x; j < shape.vocab; j += kThreads) {
    const float p = expf(load_float(x + j) - row_lse);
    store_float(out + j, ignored ? 0.0f : scale * (p - (j == t ? 1.0f : 0.0f)));
  }
}

template <typename T>
void launch_forward(const void* logits, const int64_t* targets, float* loss, float* lse, const CrossEntropyShape& shape,
                    cudaStream_t stream) {
  forward_kernel<T><<<static_cast<unsigned>(shape.rows), kThreads, 0, stream>>>(static_cast<const T*>(logits), targets,
                                                                                loss, lse, shape);
  DTLAB_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_backward(const void* logits, const int64_t* targets, const float* lse, const float* g, void* grad,
                     const CrossEntropyShape& shape, cudaStream_t stream) {
  backward_kernel<T><<<static_cast<unsigned>(shape.rows), kThreads, 0, stream>>>(static_cast<const T*>(logits), targets,
                                                                                 lse, g, static_cast<T*>(grad), shape);
  DTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void cross_entropy_forward_cuda(const void* logits, ElementType type, const int64_t* targets, float* loss, float* lse,
                                const CrossEntropyShape& shape, void* stream) {
  if (shape.rows == 0) return;
  with_element_type(type, [&](auto tag) {
    launch_forward<element_of<decltype(tag)>>(logits, targets, loss, lse, shape, static_cast<cudaStream_t>(stream));
  });
}

void cross_entropy_backward_cuda(const void* logits, ElementType type, const int64_t* targets, const float* lse,
                                 const float* g, void* grad, const CrossEntropyShape& shape, void* stream) {
  if (shape.rows == 0) return;
  with_element_type(type, [&](auto tag) {
    launch_backward<element_of<decltype(tag)>>(logits, targets, lse, g, grad, shape, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace dtlab::kernels
