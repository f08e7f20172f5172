//===- Manifest.h - the program manifest embedded in the executable -*- C++
//-*-===//
//
// The JSON document of docs/abi.md: the arena layout (every dt.global with its
// role, shape and offset), the training recipe and the data sources. It is
// built from the module after memory planning, before the globals are lowered
// away.
//
//===----------------------------------------------------------------------------===//

#ifndef DT_TARGET_MANIFEST_H
#define DT_TARGET_MANIFEST_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace dt {

/// The manifest of a planned module (globals with offsets, `dt.arena_bytes`)
/// whose job description is the module attribute `dt.job` (a dictionary
/// mirroring the manifest's "name", "source", "train" and "data" sections).
mlir::FailureOr<std::string> buildManifest(mlir::ModuleOp module);

} // namespace dt

#endif // DT_TARGET_MANIFEST_H
