//===- Manifest.h - the manifest embedded in a program ----------*- C++ -*-===//
//
// The JSON document of docs/abi.md: the mesh, the arena layout (every
// dt.global with its role, shape, offset and, on a mesh, its layout and whole
// shape), the collectives the program issues, the training recipe and the
// data sources. It is built from the module after memory planning, before the
// globals are lowered away.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_MANIFEST_H
#define DT_TARGET_MANIFEST_H

#include "dt/Pipeline/Schedule.h"
#include "dt/Transforms/PipelineInfo.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace dt {

/// The manifest of a planned module (globals with offsets, `dt.arena_bytes`)
/// whose job description is the module attribute `dt.job` (a dictionary
/// mirroring the manifest's "name", "source", "train" and "data" sections).
/// Numbers the collectives first (numberCollectives).
mlir::FailureOr<std::string> buildManifest(mlir::ModuleOp module);

/// Gives every mesh collective of `module` its `dt.id`, its index in the
/// manifest's "collectives" (entry points in module order, ops in program
/// order); the lowering passes it to the runtime, which names the collective
/// by it in messages. Collectives that have one keep it.
void numberCollectives(mlir::ModuleOp module);

} // namespace dt

#endif // DT_TARGET_MANIFEST_H
