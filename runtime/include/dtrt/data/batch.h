//===- dtrt/data/batch.h - Staging batches into input buffers ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A BatchStager connects a data source to the program's input buffers of one
// role (`in/train.<field>` or `in/eval.<field>`): it checks once that every
// such buffer matches a field of the source (dtype, rows, elements per
// sample), then fills them batch by batch. Rows past the valid ones are
// padding: zeros, and -1 in label fields, which losses and accuracy ignore.
// Only fields the program has buffers for are read.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DATA_BATCH_H
#define DTRT_DATA_BATCH_H

#include "dtrt/arena.h"
#include "dtrt/data/source.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtrt {

/// Fills the input buffers of one role from a source.
class BatchStager {
public:
  /// Matches the buffers named `in/<role>.<field>` against `source`'s fields.
  /// `rows` is the expected leading dimension of the whole batch (the global
  /// micro-batch for train, 0 to take it from the buffers for eval). In a
  /// sharded program the buffers hold this rank's rows of the batch, which
  /// `coords` (its mesh coordinates) decide. Fails when the program and the
  /// data disagree, naming both shapes.
  static Expected<BatchStager> create(const DataSource &source,
                                      const Manifest &manifest,
                                      const std::string &role, int64_t rows,
                                      const std::vector<int> &coords = {});

  /// Rows per batch over all ranks (the buffers' whole leading dimension).
  int64_t rows() const { return rows_; }
  /// Label elements per sample (what eval averages over).
  int64_t labelsPerSample() const { return labelsPerSample_; }

  /// Stages the batch of samples `indices[0..valid)` (rows past `valid` are
  /// padding): this rank's rows of it, written in place into a host arena,
  /// or assembled in host memory and copied into a device's.
  void stage(Arena &arena, const int64_t *indices, int64_t valid);

private:
  struct Slot {
    const BufferDesc *buffer;
    size_t field;
    size_t rowBytes;
    bool isLabel;
    /// Where the rows are assembled for an arena on a device (made on first
    /// use: a host arena needs none).
    std::vector<char> host;
  };

  BatchStager(const DataSource &source) : source_(&source) {}

  const DataSource *source_;
  int64_t rows_ = 0;
  /// This rank's rows: [first_, first_ + real_) of the batch, stored in
  /// localRows_ rows (the rest padding).
  int64_t first_ = 0, real_ = 0, localRows_ = 0;
  int64_t labelsPerSample_ = 1;
  std::vector<Slot> slots_;
};

} // namespace dtrt

#endif // DTRT_DATA_BATCH_H
