// rope.cu: CUDA version of the fused rotary embedding (see rope.hpp): one thread per pair, fp32 arithmetic, one
// rounding per output element. Compiled for sm_80 and sm_90 in the cuda configuration.
#include "kernels/cuda_util.cuh"
#include "kernels/rope.hpp"

namespace dtlab::kernels {
namespace {

template <typename T>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ out, const float* __restrict__ cos,
                            const float* __restrict__ sin, RopeShape shape, float sign) {
  const size_t pairs = static_cast<size_t>(shape.rows) * static_cast<size_t>(shape.half);
  for (size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; k < pairs;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int64_t r = static_cast<int64_t>(k) / shape.half, i = static_cast<int64_t>(k) % shape.half;
    const int64_t s = (r / shape.heads) % shape.seq_len;
    const T* in_row = x + r * 2 * shape.half;
    T* out_row = out + r * 2 * shape.half;
    float a = 0, b = 0;
    rope_rotate(load_float(in_row + i), load_float(in_row + i + shape.half), cos[s * shape.half + i],
                sign * sin[s * shape.half + i], a, b);
    store_float(out_row + i, a);
    store_float(out_row + i + shape.half, b);
  }
}

template <typename T>
void launch(const void* x, void* out, const float* cos, const float* sin, const RopeShape& shape, float sign,
            cudaStream_t stream) {
  const int threads = 256;
  const int blocks = grid_for(static_cast<size_t>(shape.rows) * static_cast<size_t>(shape.half), threads);
  rope_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(out), cos, sin, shape, sign);
  DTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void rope_cuda(const void* x, void* out, ElementType type, const float* cos, const float* sin, const RopeShape& shape,
               bool inverse, void* stream) {
  if (shape.rows == 0 || shape.half == 0) return;
  const float sign = inverse ? -1.0f : 1.0f;
  with_element_type(type, [&](auto tag) {
    launch<element_of<decltype(tag)>>(x, out, cos, sin, shape, sign, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace dtlab::kernels
