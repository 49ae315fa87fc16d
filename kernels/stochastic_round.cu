// stochastic_round.cu: CUDA version of the stochastic-rounding bf16 cast (see the header). Same bits
// as the CPU reference for the same seed. Compiled for sm_80 and sm_90 in the cuda configuration.
#include "kernels/cuda_util.cuh"
#include "kernels/stochastic_round.hpp"

namespace dtlab::kernels {
namespace {

__device__ uint32_t device_round_bits(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<uint32_t>(z) & 0xFFFFu;
}

__global__ void stochastic_round_kernel(const float* __restrict__ in, uint16_t* __restrict__ out, size_t n,
                                        uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = in[i];
    const uint32_t u = __float_as_uint(x);
    if (isnan(x)) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x0040u);
    } else if (isinf(x)) {
      out[i] = static_cast<uint16_t>(u >> 16);
    } else {
      out[i] = static_cast<uint16_t>((u + device_round_bits(seed, i)) >> 16);
    }
  }
}

}  // namespace

void stochastic_round_to_bf16_cuda(const float* in, uint16_t* out, size_t n, uint64_t seed, void* stream) {
  if (n == 0) return;
  const int threads = 256;
  const int blocks = grid_for(n, threads);
  stochastic_round_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(in, out, n, seed);
  DTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dtlab::kernels
