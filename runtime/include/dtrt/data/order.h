//===- dtrt/data/order.h - Seeded data order -------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The train source is visited in a fresh permutation every epoch. The
// permutation of epoch e is a pure function of (train seed, e, N):
//   rng  = SplitMix64(randomBits(streamKey(seed, "data-order"), e))
//   perm = [0, 1, ..., N-1]
//   for i = N-1 down to 1: j = rng.below(i + 1); swap(perm[i], perm[j])
// (Fisher-Yates with the unbiased bounded draw of dtrt/rng.h). It is written
// out here rather than taken from std::shuffle, whose algorithm differs
// between standard libraries, so that a run, its resumption and another
// machine visit the data in the same order. The data position itself is
// derived from the `step` counter (epoch = step / steps_per_epoch), which is
// why resuming needs no loader state beyond the seed.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DATA_ORDER_H
#define DTRT_DATA_ORDER_H

#include <cstdint>
#include <vector>

namespace dtrt {

/// The order in which epoch `epoch` visits the N samples of the train source.
std::vector<int64_t> epochPermutation(uint64_t seed, int64_t epoch, int64_t n);

} // namespace dtrt

#endif // DTRT_DATA_ORDER_H
