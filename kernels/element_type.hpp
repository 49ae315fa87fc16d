// element_type.hpp: the element types the fused kernels take (without torch's ScalarType, so kernels/ stays
// torch-free), and the marker for functions both the host and CUDA compile.
#pragma once

#ifdef __CUDACC__
#define DTLAB_HOST_DEVICE __host__ __device__
#else
#define DTLAB_HOST_DEVICE
#endif

namespace dtlab::kernels {

enum class ElementType { float32, bfloat16, float16 };

}  // namespace dtlab::kernels
