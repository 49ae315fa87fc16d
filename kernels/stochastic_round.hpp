// stochastic_round.hpp: fp32 -> bf16 casts with stochastic rounding, CPU reference and CUDA version.
//
// Rounding a value x that lies between two bf16 neighbours lo < x < hi gives hi with probability
// (x - lo) / (hi - lo), so E[round(x)] = x: updates far below bf16's resolution are not lost on
// average (bf16 master weights). Implementation: add 16 random bits to the fp32 bit pattern, then
// truncate the low 16 bits. Randomness is a counter-based hash of (seed, element index), so CPU and
// CUDA produce the same bits for the same seed, and results do not depend on thread count.
// NaN stays NaN; infinities stay infinite.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtlab::kernels {

// The 16 random bits used for element `index` under `seed` (shared by CPU and CUDA versions).
inline uint32_t stochastic_round_bits(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<uint32_t>(z) & 0xFFFFu;
}

// out[i] = bf16 bits of stochastically rounded in[i], i in [0, n).
void stochastic_round_to_bf16_cpu(const float* in, uint16_t* out, size_t n, uint64_t seed);
// Round-to-nearest-even reference (what a plain cast does).
void round_nearest_to_bf16_cpu(const float* in, uint16_t* out, size_t n);
float bf16_bits_to_float(uint16_t bits);

#ifdef DTLAB_WITH_CUDA
// Same on device pointers; launches on `stream` (cudaStream_t passed as void* to keep CUDA headers out).
void stochastic_round_to_bf16_cuda(const float* in, uint16_t* out, size_t n, uint64_t seed, void* stream);
#endif

}  // namespace dtlab::kernels
