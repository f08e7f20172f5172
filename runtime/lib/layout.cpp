//===- layout.cpp - Which elements of a tensor a rank holds ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/layout.h"

#include <algorithm>

namespace dtrt {

DimPiece dimPiece(int64_t size, const DimLayout &dim, const MeshSpec &mesh,
                  const std::vector<int> &coords) {
  int64_t block = dim.axes.empty() ? size : size / dim.blocks;
  DimPiece piece{block, 0, block};
  for (int a : dim.axes) {
    int64_t k = mesh.sizes[size_t(a)];
    int64_t capacity = (piece.capacity + k - 1) / k;
    int64_t offset = int64_t(coords[size_t(a)]) * capacity;
    piece.start += offset;
    piece.count = std::clamp<int64_t>(piece.count - offset, 0, capacity);
    piece.capacity = capacity;
  }
  return piece;
}

int64_t localDimSize(int64_t size, const DimLayout &dim, const MeshSpec &mesh) {
  if (dim.axes.empty())
    return size;
  int64_t capacity = size / dim.blocks;
  for (int a : dim.axes) {
    int64_t k = mesh.sizes[size_t(a)];
    capacity = (capacity + k - 1) / k;
  }
  return dim.blocks * capacity;
}

std::vector<int> meshCoordinates(const MeshSpec &mesh, int rank) {
  std::vector<int> coords(mesh.sizes.size());
  for (size_t a = mesh.sizes.size(); a-- > 0;) {
    coords[a] = rank % mesh.sizes[a];
    rank /= mesh.sizes[a];
  }
  return coords;
}

void forEachRun(const BufferDesc &buffer, const MeshSpec &mesh,
                const std::vector<int> &coords,
                const std::function<void(int64_t, int64_t, int64_t)> &run) {
  const std::vector<int64_t> &shape = buffer.shape;
  if (!buffer.layout || shape.empty()) {
    if (buffer.elements > 0)
      run(0, 0, buffer.elements);
    return;
  }
  size_t rank = shape.size();
  // Per dimension: the piece, the block size of the whole tensor, and the
  // strides of the shard and of the whole tensor.
  std::vector<DimPiece> pieces(rank);
  std::vector<int64_t> blockSize(rank), blocks(rank), localStride(rank),
      globalStride(rank);
  for (size_t d = 0; d < rank; ++d) {
    const DimLayout &dim = buffer.layout->dims[d];
    pieces[d] = dimPiece(buffer.globalShape[d], dim, mesh, coords);
    blocks[d] = dim.axes.empty() ? 1 : dim.blocks;
    blockSize[d] = buffer.globalShape[d] / blocks[d];
  }
  int64_t ls = 1, gs = 1;
  for (size_t d = rank; d-- > 0;) {
    localStride[d] = ls;
    globalStride[d] = gs;
    ls *= shape[d];
    gs *= buffer.globalShape[d];
  }
  // Depth-first over the real entries of every dimension but the last, whose
  // real entries of each block form one run.
  std::function<void(size_t, int64_t, int64_t)> walk = [&](size_t d,
                                                          int64_t local,
                                                          int64_t global) {
    const DimPiece &p = pieces[d];
    for (int64_t b = 0; b < blocks[d]; ++b) {
      int64_t l = local + b * p.capacity * localStride[d];
      int64_t g = global + (b * blockSize[d] + p.start) * globalStride[d];
      if (d + 1 == rank) {
        if (p.count > 0)
          run(l, g, p.count);
        continue;
      }
      for (int64_t i = 0; i < p.count; ++i)
        walk(d + 1, l + i * localStride[d], g + i * globalStride[d]);
    }
  };
  walk(0, 0, 0);
}

} // namespace dtrt
