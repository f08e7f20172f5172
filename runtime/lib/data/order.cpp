//===- order.cpp - Seeded data order --------------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Fisher-Yates over the runtime's own generator; see dtrt/data/order.h for the
// exact algorithm (the unit tests pin it with golden values).
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/order.h"

#include "dtrt/rng.h"

#include <numeric>
#include <utility>

namespace dtrt {

std::vector<int64_t> epochPermutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> perm(size_t(n > 0 ? n : 0));
  std::iota(perm.begin(), perm.end(), int64_t(0));
  SplitMix64 rng(randomBits(streamKey(seed, "data-order"), uint64_t(epoch)));
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[size_t(i)], perm[size_t(rng.below(uint64_t(i) + 1))]);
  return perm;
}

} // namespace dtrt
