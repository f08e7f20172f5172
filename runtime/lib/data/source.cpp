//===- source.cpp - Open a data source by kind ----------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The one place that maps a manifest `kind` to its implementation.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/source.h"

namespace dtrt {

Expected<std::unique_ptr<DataSource>> openDataSource(const DataSpec &spec,
                                                     const std::string &role) {
  switch (spec.kind) {
  case DataKind::Idx:
    return openIdxSource(spec, role);
  case DataKind::Tokens:
    return openTokenSource(spec, role);
  case DataKind::TokenClasses:
    return openTokenClassesSource(spec, role);
  case DataKind::Synthetic:
    return openSyntheticSource(spec, role);
  }
  return Error("unknown data source kind");
}

} // namespace dtrt
