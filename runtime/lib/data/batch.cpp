//===- batch.cpp - Staging batches into input buffers ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Batches are assembled in place in a host arena, and in host memory then
// copied once per buffer into an arena on a device.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/batch.h"
#include "dtrt/layout.h"

#include <algorithm>
#include <cstring>
#include <fmt/ranges.h>

namespace dtrt {

static std::string shapeString(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

Expected<BatchStager> BatchStager::create(const DataSource &source,
                                          const Manifest &manifest,
                                          const std::string &role,
                                          int64_t rows,
                                          const std::vector<int> &coords) {
  BatchStager stager(source);
  std::string prefix = "in/" + role + ".";
  for (const BufferDesc &b : manifest.buffers) {
    if (b.name.compare(0, prefix.size(), prefix) != 0)
      continue;
    std::string field = b.name.substr(prefix.size());
    const std::vector<FieldInfo> &fields = source.fields();
    size_t f = 0;
    while (f < fields.size() && fields[f].name != field)
      ++f;
    if (f == fields.size())
      return Error(fmt::format("the program reads {}.{} but the {} source ({}) "
                               "has no field '{}'",
                               role, field, role, source.describe(), field));
    const FieldInfo &info = fields[f];
    if (b.shape.empty() || b.shape[0] <= 0)
      return Error(fmt::format("input buffer {} has shape {}; inputs are "
                               "[rows, ...]",
                               b.name, shapeString(b.shape)));
    int64_t bufferRows = b.globalShape[0];
    if ((rows > 0 && bufferRows != rows) ||
        (stager.rows_ > 0 && bufferRows != stager.rows_))
      return Error(fmt::format("input buffer {} has {} rows, but the batch "
                               "has {}",
                               b.name, bufferRows,
                               rows > 0 ? rows : stager.rows_));
    stager.rows_ = bufferRows;
    // This rank's rows of the batch.
    DimPiece piece{bufferRows, 0, bufferRows};
    if (b.layout)
      piece = dimPiece(bufferRows, b.layout->dims[0], manifest.mesh, coords);
    if (!stager.slots_.empty() &&
        (piece.start != stager.first_ || piece.count != stager.real_))
      return Error(fmt::format("input buffer {} splits the {} batch unlike "
                               "the other inputs; this is a bug in dtc, "
                               "please report it",
                               b.name, role));
    stager.first_ = piece.start;
    stager.real_ = piece.count;
    stager.localRows_ = b.shape[0];
    int64_t perRow = b.elements / b.shape[0];
    if (perRow != info.elements || b.dtype != info.dtype)
      return Error(fmt::format(
          "the {} data does not fit the program: a sample's '{}' is {} x {} "
          "in the data ({}), but the program's {} takes {} x {} per sample "
          "(shape {}); use data of the shape the program was compiled for",
          role, field, info.elements, dtypeName(info.dtype), source.describe(),
          b.name, perRow, dtypeName(b.dtype), shapeString(b.shape)));
    std::vector<int64_t> sample(b.globalShape.begin() + 1, b.globalShape.end());
    if (!info.shape.empty() && sample != info.shape)
      return Error(fmt::format(
          "the {} data does not fit the program: a sample's '{}' is {} in the "
          "data ({}), but the program's {} takes {}; use data of the shape "
          "the program was compiled for",
          role, field, shapeString(info.shape), source.describe(), b.name,
          shapeString(sample)));
    Slot slot{&b, f, size_t(perRow) * dtypeSize(b.dtype), info.isLabel, {}};
    if (info.isLabel)
      stager.labelsPerSample_ = info.elements;
    stager.slots_.push_back(std::move(slot));
  }
  if (stager.slots_.empty())
    return Error(fmt::format("the program has no in/{}.* input buffers for its "
                             "{} source",
                             role, role));
  return stager;
}

void BatchStager::stage(Arena &arena, const int64_t *indices, int64_t valid) {
  // Rows [first_, first_ + mine) of the batch are real samples here.
  int64_t mine = std::clamp<int64_t>(valid - first_, 0, real_);
  // Samples come in a random order: each is a cache miss unless asked for
  // this many samples ahead.
  constexpr int64_t kAhead = 4;
  for (Slot &slot : slots_) {
    // A host arena is filled in place; a device's takes one copy.
    char *inPlace = arena.hostData(*slot.buffer);
    if (!inPlace)
      slot.host.resize(slot.buffer->bytes);
    char *dst = inPlace ? inPlace : slot.host.data();
    for (int64_t r = 0; r < std::min(kAhead, mine); ++r)
      source_->prefetch(slot.field, indices[first_ + r]);
    for (int64_t r = 0; r < mine; ++r) {
      if (r + kAhead < mine)
        source_->prefetch(slot.field, indices[first_ + r + kAhead]);
      source_->read(slot.field, indices[first_ + r],
                    dst + size_t(r) * slot.rowBytes);
    }
    char *pad = dst + size_t(mine) * slot.rowBytes;
    size_t padBytes = size_t(localRows_ - mine) * slot.rowBytes;
    // Labels are integers; all bytes 0xff is -1 in two's complement, whatever
    // the width.
    std::memset(pad, slot.isLabel ? 0xff : 0, padBytes);
    if (!inPlace)
      arena.write(*slot.buffer, dst);
  }
}

} // namespace dtrt
