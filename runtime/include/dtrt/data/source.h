//===- dtrt/data/source.h - Data sources ------------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A data source is a finite, indexable set of samples, each a few named
// fields (`x`, `y`) of fixed dtype and size. Sources are opened and fully
// validated at start (a bad file fails before the first step, naming the file
// and what to do), then read one sample field at a time into host staging
// memory; the order, batching and padding are the loader's business
// (dtrt/data/batch.h, dtrt/data/order.h), not the source's.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DATA_SOURCE_H
#define DTRT_DATA_SOURCE_H

#include "dtrt/error.h"
#include "dtrt/manifest.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtrt {

/// One field of every sample.
struct FieldInfo {
  std::string name;
  DType dtype = DType::F32;
  /// Elements per sample.
  int64_t elements = 1;
  /// A label field: padding rows get -1 (ignored by losses and accuracy)
  /// instead of 0, and its elements are what eval averages over.
  bool isLabel = false;
  /// The sample's shape when the source knows one the program must take as
  /// it is (an IDX image's [1, rows, cols]); empty: any of `elements`.
  std::vector<int64_t> shape;
};

/// A finite, indexable set of samples.
class DataSource {
public:
  virtual ~DataSource() = default;

  /// One line for the start banner: kind, sample count, shape, files.
  virtual std::string describe() const = 0;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// The fields of a sample.
  virtual const std::vector<FieldInfo> &fields() const = 0;
  /// Writes field `field` (an index into fields()) of sample `index` into
  /// `dst`, `fields()[field].elements` elements of its dtype.
  virtual void read(size_t field, int64_t index, void *dst) const = 0;
  /// Hints that read(field, index) comes soon: a source holding its samples
  /// in memory starts loading them into the cache (a random sample of a file
  /// larger than the cache is otherwise a miss per line).
  virtual void prefetch(size_t field, int64_t index) const {}
  /// Tokens per sample for a token source (throughput is then reported in
  /// tokens/s), 0 otherwise.
  virtual int64_t tokensPerSample() const { return 0; }
};

/// Opens and validates the source `spec` describes. `role` is "train" or
/// "eval": it names the source in messages (and the --data option that
/// overrides it) and selects the synthetic source's sample stream.
Expected<std::unique_ptr<DataSource>> openDataSource(const DataSpec &spec,
                                                     const std::string &role);

/// Opens an idx source (dtrt/data/idx.h has the file-level reader).
Expected<std::unique_ptr<DataSource>> openIdxSource(const DataSpec &spec,
                                                    const std::string &role);
/// Opens a token-shard source.
Expected<std::unique_ptr<DataSource>> openTokenSource(const DataSpec &spec,
                                                      const std::string &role);
/// Opens tokenized classification examples (dt-tokenize --classes).
Expected<std::unique_ptr<DataSource>>
openTokenClassesSource(const DataSpec &spec, const std::string &role);
/// Creates a synthetic source.
Expected<std::unique_ptr<DataSource>>
openSyntheticSource(const DataSpec &spec, const std::string &role);

} // namespace dtrt

#endif // DTRT_DATA_SOURCE_H
