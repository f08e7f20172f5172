//===- dtrt/rng.h - Counter-based random numbers ---------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// All randomness of the runtime (parameter initialisation, synthetic data,
// data order) comes from splitmix64 used as a *counter-based* generator: the
// i-th number of a stream is a pure function of (stream key, i), so a value
// never depends on how many values were drawn before it, in which order
// buffers are visited, or (later) which rank owns which shard of a tensor.
//
// The exact algorithm, which checkpoints and tests depend on:
//   key(seed, name) = mix64(mix64(seed) ^ fnv1a64(name))
//   bits(key, i)    = mix64(key + (i + 1) * 0x9E3779B97F4A7C15)
//                     (splitmix64's i-th output for state `key`)
//   uniform(key, i) = (bits(key, i) >> 11) * 2^-53               in [0, 1)
//   normal(key, i)  = sqrt(-2 ln(1 - uniform(key, 2i))) * cos(2 pi uniform(key,
//   2i+1))
//                     (Box-Muller; the sine half is not used, so that value
//                     i needs only counters 2i and 2i+1)
// where mix64 is splitmix64's finaliser (Steele, Lea & Flood, 2014) and
// fnv1a64 is 64-bit FNV-1a over the name's bytes.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_RNG_H
#define DTRT_RNG_H

#include <cstdint>
#include <string_view>

namespace dtrt {

/// splitmix64's finaliser: a bijective mix of 64 bits.
uint64_t mix64(uint64_t z);

/// 64-bit FNV-1a of `bytes`.
uint64_t fnv1a64(std::string_view bytes);

/// The key of the stream called `name` under `seed`.
uint64_t streamKey(uint64_t seed, std::string_view name);

/// The i-th 64 random bits of stream `key`.
uint64_t randomBits(uint64_t key, uint64_t i);

/// The i-th uniform double in [0, 1) of stream `key` (53 random bits).
double randomUniform(uint64_t key, uint64_t i);

/// The i-th standard normal of stream `key` (uses counters 2i and 2i+1).
double randomNormal(uint64_t key, uint64_t i);

/// A sequential splitmix64 generator, for algorithms that consume a variable
/// number of draws (rejection sampling in Fisher-Yates). Its n-th output equals
/// randomBits(seed, n).
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  /// The next 64 random bits.
  uint64_t next();
  /// A uniform integer in [0, bound), bound > 0, without modulo bias
  /// (rejection of the top partial range).
  uint64_t below(uint64_t bound);

private:
  uint64_t state_;
};

} // namespace dtrt

#endif // DTRT_RNG_H
