// cuda_util.cuh: what the CUDA files of kernels/ share: the launch check, and fp32 loads and stores of the element
// types (compute in fp32, round once on the way out).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/element_type.hpp"

#define DTLAB_CUDA_CHECK(expr)                                                                                \
  do {                                                                                                        \
    cudaError_t status_ = (expr);                                                                             \
    if (status_ != cudaSuccess)                                                                               \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #expr + ": " + \
                               cudaGetErrorString(status_));                                                  \
  } while (0)

namespace dtlab::kernels {

__device__ __forceinline__ float load_float(const float* p) { return *p; }
__device__ __forceinline__ float load_float(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load_float(const __half* p) { return __half2float(*p); }

__device__ __forceinline__ void store_float(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_float(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store_float(__half* p, float v) { *p = __float2half_rn(v); }

// Calls launch(T*{}) with T the element type `type` names (float, __nv_bfloat16, __half): the one switch every
// launcher of a templated kernel shares.
template <typename Launch>
void with_element_type(ElementType type, Launch&& launch) {
  switch (type) {
    case ElementType::float32:
      return launch(static_cast<float*>(nullptr));
    case ElementType::bfloat16:
      return launch(static_cast<__nv_bfloat16*>(nullptr));
    case ElementType::float16:
      return launch(static_cast<__half*>(nullptr));
  }
}
template <typename Tag>
using element_of = std::remove_pointer_t<Tag>;

// Blocks for a grid-stride loop over n elements with `threads` per block (at most 65535, at least 1).
inline int grid_for(size_t n, int threads) {
  const size_t wanted = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  return static_cast<int>(wanted == 0 ? 1 : (wanted < 65535 ? wanted : 65535));
}

}  // namespace dtlab::kernels
