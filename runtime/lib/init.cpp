//===- init.cpp - Parameter initialisation --------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The formulas are in dtrt/init.h. Values are produced in chunks so that a
// large parameter (an embedding table) needs only a bounded host buffer per
// copy when the arena is on a device; on the host a chunk is the whole tensor
// up to 16 Mi elements.
//
//===----------------------------------------------------------------------===//

#include "dtrt/init.h"

#include "dtrt/rng.h"

#include <algorithm>
#include <cassert>

namespace dtrt {

void initValues(const BufferDesc &param, uint64_t seed, int64_t begin,
                std::vector<float> &out) {
  assert(param.init && "not a param");
  const InitSpec &init = *param.init;
  uint64_t key = streamKey(seed, param.name);
  for (size_t k = 0; k < out.size(); ++k) {
    uint64_t i = uint64_t(begin) + k;
    double v = 0.0;
    switch (init.kind) {
    case InitSpec::Kind::Uniform:
      v = init.a + (init.b - init.a) * randomUniform(key, i);
      break;
    case InitSpec::Kind::Normal:
      v = init.a + init.b * randomNormal(key, i);
      break;
    case InitSpec::Kind::Constant:
      v = init.a;
      break;
    }
    out[k] = float(v);
  }
}

void initParams(Arena &arena, uint64_t seed, const std::vector<int> &coords) {
  constexpr int64_t kChunk = int64_t(1) << 24;
  std::vector<float> values;
  const Manifest &m = arena.manifest();
  for (const BufferDesc &b : m.buffers) {
    if (b.role != Role::Param || !m.holds(b, coords))
      continue;
    // Runs of elements this rank holds, in chunks of bounded host memory.
    forEachRun(b, m.mesh, coords,
               [&](int64_t local, int64_t global, int64_t count) {
                 for (int64_t done = 0; done < count; done += kChunk) {
                   values.resize(size_t(std::min(kChunk, count - done)));
                   initValues(b, seed, global + done, values);
                   arena.writePart(b, size_t(local + done) * 4,
                                   values.size() * 4, values.data());
                 }
               });
  }
}

} // namespace dtrt
