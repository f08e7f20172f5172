//===- dtrt/layout.h - Which elements of a tensor a rank holds --*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The arithmetic of sharded buffers, the runtime's side of the compiler's
// dt/Dialect/DT/IR/Sharding.h (docs/abi.md, "Layouts"): a dimension of size n
// in g blocks is split block by block, by its axes one after another; axis a
// of size k cuts what the previous axes left (capacity c) into k pieces of
// ceil(c / k) entries, the last ones shorter or empty; a rank stores the full
// capacity, zeros past its real entries. Initialisation, data staging and
// checkpoints map a rank's elements to the whole tensor's through it.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_LAYOUT_H
#define DTRT_LAYOUT_H

#include "dtrt/manifest.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace dtrt {

/// The entries a rank holds of one dimension: `capacity` per block, of which
/// the first `count` are real and are entries [start, start + count) of the
/// block.
struct DimPiece {
  int64_t capacity = 0, start = 0, count = 0;
};

/// The piece of a dimension of `size` laid out by `dim` that the rank at
/// `coords` (one coordinate per mesh axis) holds.
DimPiece dimPiece(int64_t size, const DimLayout &dim, const MeshSpec &mesh,
                  const std::vector<int> &coords);

/// The size of that dimension on every rank (blocks x capacity).
int64_t localDimSize(int64_t size, const DimLayout &dim, const MeshSpec &mesh);

/// The coordinates of `rank` on the mesh (row-major, the innermost axis
/// fastest).
std::vector<int> meshCoordinates(const MeshSpec &mesh, int rank);

/// Calls `run(local, global, count)` for every run of consecutive elements of
/// `buffer` (along its last dimension) that the rank at `coords` holds:
/// elements [local, local + count) of its shard are elements [global, global
/// + count) of the whole tensor, both row-major. Padding is skipped. Without
/// a layout the whole buffer is one run.
void forEachRun(const BufferDesc &buffer, const MeshSpec &mesh,
                const std::vector<int> &coords,
                const std::function<void(int64_t, int64_t, int64_t)> &run);

} // namespace dtrt

#endif // DTRT_LAYOUT_H
