//===- dtrt/init.h - Parameter initialisation ------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Fills every `param` buffer from its manifest `init` with the counter-based
// generator of dtrt/rng.h: element i of parameter P is
//   uniform(low, high):  low + (high - low) * randomUniform(key, i)
//   normal(mean, std):   mean + std * randomNormal(key, i)
//   constant(value):     value
// with key = streamKey(seed, P's name), computed in double and rounded to
// f32. A value therefore depends only on (seed, P's name, i): not on the
// order of the buffers, on other parameters, or on sharding.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_INIT_H
#define DTRT_INIT_H

#include "dtrt/arena.h"
#include "dtrt/layout.h"

#include <cstdint>
#include <vector>

namespace dtrt {

/// The initial value of the elements [begin, begin + out.size()) of `param`.
void initValues(const BufferDesc &param, uint64_t seed, int64_t begin,
                std::vector<float> &out);

/// Initialises every param buffer of the arena's manifest. A sharded
/// parameter gets the values its elements have in the whole tensor (element
/// i of P depends only on the seed, P's name and i), so every layout of a
/// program starts from the same model; padding stays zero. `coords` are this
/// rank's mesh coordinates (empty for a program of one rank).
void initParams(Arena &arena, uint64_t seed,
                const std::vector<int> &coords = {});

} // namespace dtrt

#endif // DTRT_INIT_H
