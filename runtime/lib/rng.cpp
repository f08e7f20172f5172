//===- rng.cpp - Counter-based random numbers -----------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The algorithm is specified in dtrt/rng.h; changing any constant here changes
// every initialisation, synthetic data set and data order, so the unit tests
// pin golden values.
//
//===----------------------------------------------------------------------===//

#include "dtrt/rng.h"

#include <cmath>

namespace dtrt {

static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

uint64_t streamKey(uint64_t seed, std::string_view name) {
  return mix64(mix64(seed) ^ fnv1a64(name));
}

uint64_t randomBits(uint64_t key, uint64_t i) {
  return mix64(key + (i + 1) * kGolden);
}

double randomUniform(uint64_t key, uint64_t i) {
  return double(randomBits(key, i) >> 11) * 0x1.0p-53;
}

double randomNormal(uint64_t key, uint64_t i) {
  // 1 - u lies in (0, 1], so the logarithm is finite.
  double u1 = 1.0 - randomUniform(key, 2 * i);
  double u2 = randomUniform(key, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t SplitMix64::next() {
  state_ += kGolden;
  return mix64(state_);
}

uint64_t SplitMix64::below(uint64_t bound) {
  // Accept x only below the largest multiple of bound that fits in 2^64, so
  // every residue is equally likely.
  uint64_t limit = -bound % bound; // = 2^64 mod bound
  for (;;) {
    uint64_t x = next();
    if (x >= limit)
      return x % bound;
  }
}

} // namespace dtrt
