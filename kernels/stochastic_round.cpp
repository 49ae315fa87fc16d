// stochastic_round.cpp: CPU reference of the stochastic-rounding bf16 cast (see the header).
#include "kernels/stochastic_round.hpp"

#include <cmath>
#include <cstring>

namespace dtlab::kernels {

namespace {
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
}  // namespace

float bf16_bits_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void stochastic_round_to_bf16_cpu(const float* in, uint16_t* out, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = float_bits(in[i]);
    if (std::isnan(in[i])) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x0040u);  // keep it a (quiet) NaN
    } else if (std::isinf(in[i])) {
      out[i] = static_cast<uint16_t>(u >> 16);
    } else {
      // Adding < 2^16 to the bit pattern carries into the kept bits with probability low16 / 2^16.
      // Overflow past the largest finite bf16 rounds to infinity, as a plain cast would.
      out[i] = static_cast<uint16_t>((u + stochastic_round_bits(seed, i)) >> 16);
    }
  }
}

void round_nearest_to_bf16_cpu(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = float_bits(in[i]);
    if (std::isnan(in[i])) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x0040u);
    } else {
      const uint32_t lsb = (u >> 16) & 1u;
      out[i] = static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16);
    }
  }
}

}  // namespace dtlab::kernels
