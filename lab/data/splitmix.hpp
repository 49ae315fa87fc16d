// splitmix.hpp: the data layer's only randomness (splitmix64), shared by the synthetic source and the sampler's
// shuffle. Nothing in the data layer touches torch's generators, so the data never perturbs model initialisation or
// dropout.
#pragma once

#include <cstdint>

namespace dtlab::data_random {

// The splitmix64 finaliser: a bijection on 64 bits.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, n) by multiply-high (bias < n / 2^64, irrelevant here). REQUIRES: n >= 1.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

// Independent stream per (seed, salt, index): different salts keep the grammar table, the sequences and the
// shuffle from sharing draws.
inline uint64_t stream_seed(int64_t seed, uint64_t salt, uint64_t index) {
  return mix64(mix64(static_cast<uint64_t>(seed) ^ salt) + mix64(index + 0x632be59bd9b4e019ULL));
}

}  // namespace dtlab::data_random
