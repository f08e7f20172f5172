//===- dtrt/data/idx.h - IDX files (MNIST, Fashion-MNIST) -------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The IDX format (LeCun's MNIST files): a big-endian header of two zero
// bytes, a type code (0x08: unsigned byte), the number of dimensions and one
// uint32 per dimension, then the elements. Files may be gzip-compressed; zlib's
// gzread reads both kinds. An idx source pairs an images file (N x d1 x ...)
// with a labels file (N), keeps both as uint8 and converts a sample's bytes to
// f32 times `scale` only when it is staged.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DATA_IDX_H
#define DTRT_DATA_IDX_H

#include "dtrt/error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrt {

/// The contents of one IDX file of unsigned bytes.
struct IdxArray {
  /// dims[0] is the number of samples.
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

/// Reads and validates an IDX file of unsigned bytes (raw or gzip) with
/// `rank` dimensions (0: any number >= 1). `what` names the file in messages
/// ("train images file"), `option` is the --data option that overrides it.
/// The dimensions an IDX header of `size` bytes at `b` declares (the samples
/// first), checked: unsigned bytes, `rank` dimensions (0: any), none zero.
/// The error says why, without naming the file.
Expected<std::vector<int64_t>> parseIdxHeader(const uint8_t *b, size_t size,
                                              int rank);

/// The dimensions of the IDX file (raw or gzip) at `path`, reading only its
/// header (idx_header.cpp; dtc links it alone).
Expected<std::vector<int64_t>> readIdxDims(const std::string &path, int rank);

Expected<IdxArray> readIdxFile(const std::string &path, int rank,
                               const std::string &what,
                               const std::string &option);

/// The labels file that goes with an images file, by the usual naming:
/// "...-images-idx3-ubyte[.gz]" -> "...-labels-idx1-ubyte[.gz]" (also
/// "images.idx3" -> "labels.idx1"). Empty when the name follows neither.
std::string deriveLabelsPath(std::string_view imagesPath);

} // namespace dtrt

#endif // DTRT_DATA_IDX_H
