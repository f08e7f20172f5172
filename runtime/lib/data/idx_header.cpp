//===- idx_header.cpp - The header of an IDX file -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The header parser the program's reader and dtc share: dtc reads an image
// file's dimensions at compile time (`nn.idx(..., image = true)` gives the
// images their shape) with the same checks the program makes.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/idx.h"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <zlib.h>

namespace dtrt {

Expected<std::vector<int64_t>> parseIdxHeader(const uint8_t *b, size_t size,
                                              int rank) {
  if (size < 4)
    return Error(fmt::format("it holds only {} bytes", size));
  if (b[0] != 0 || b[1] != 0)
    return Error(fmt::format("bad magic number {:02x}{:02x}{:02x}{:02x}", b[0],
                             b[1], b[2], b[3]));
  if (b[2] != 0x08)
    return Error(fmt::format("element type 0x{:02x} is not unsigned byte "
                             "(0x08)",
                             b[2]));
  int ndims = b[3];
  if (ndims == 0 || (rank != 0 && ndims != rank))
    return Error(fmt::format("it has {} dimensions, {} {}", ndims,
                             rank == 1 ? "a labels file has" : "expected",
                             rank == 0 ? "at least 1" : std::to_string(rank)));
  if (size < 4 + 4 * size_t(ndims))
    return Error("the header is truncated");
  std::vector<int64_t> dims;
  uint64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint8_t *p = b + 4 + 4 * size_t(i);
    uint32_t d = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 |
                 uint32_t(p[2]) << 8 | uint32_t(p[3]);
    if (d == 0)
      return Error(fmt::format("dimension {} is 0", i));
    dims.push_back(d);
    total *= d;
    if (total > (uint64_t(1) << 40))
      return Error("its dimensions are impossibly large");
  }
  return dims;
}

Expected<std::vector<int64_t>> readIdxDims(const std::string &path, int rank) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f)
    return Error(fmt::format("cannot open '{}': {}", path,
                             errno ? std::strerror(errno) : "out of memory"));
  // The magic number, then at most 255 big-endian dimensions.
  uint8_t header[4 + 4 * 255];
  int n = gzread(f, header, sizeof header);
  gzclose(f);
  if (n < 0)
    return Error(fmt::format("cannot read '{}'", path));
  Expected<std::vector<int64_t>> dims = parseIdxHeader(header, size_t(n), rank);
  if (!dims)
    return Error(fmt::format("'{}' is not a valid IDX file: {}", path,
                             dims.error().message()));
  return dims;
}

} // namespace dtrt
